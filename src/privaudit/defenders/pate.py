"""PATE with confident-GNMax aggregation on features (``kind: pate``).

Papernot et al. 2018 ("Scalable private learning with PATE"), as run by Malek et al. 2021
(PATE-FM, appendix Table 3):

1. The training rows are split (seeded) into a *query pool* (``query_fraction`` of them, labels
   never read by the recipe: PATE's public unlabeled data) and a private part, partitioned into
   ``teachers`` disjoint shares; one ``teacher`` defender (any registered kind) is trained per share.
2. Every pool row is a query. Confident GNMax: with vote counts ``n_j`` (j = class), answer only if
   ``max_j n_j + N(0, σ1²) ≥ T``, and then answer ``argmax_j (n_j + N(0, σ2²))``.
3. A ``student`` defender (any registered kind) is trained on the answered queries and their
   answers; it is the released model.

Knobs follow Table 3's CIFAR-10 rows, which scale with the number of teachers t:
``T = threshold_fraction · t`` (0.5 in every row: 100/200, 400/800) and ``σ1 = sigma1_over_sigma2 · σ2``
(160/20 = 8 in the high-accuracy row). σ2 is calibrated to the target ε.

**Privacy accounting — data-independent RDP bound.** Changing one private row changes one
teacher's vote: the max count moves by ≤ 1 (threshold step: Gaussian mechanism, RDP α/(2σ1²)) and
the histogram by L2 ≤ √2 (GNMax: RDP α/σ2², Papernot et al. 2018 Prop. 8). Every query is charged
both, whether answered or not, so the total is ``ρα`` with ``ρ = Q (1/(2σ1²) + 1/σ2²)`` independent of
the data; ε at δ is the Balle et al. 2020 RDP conversion (:func:`rdp_linear_to_dp`). The
data-dependent (smooth-sensitivity) analysis of Papernot et al. 2018 is tighter and is not done.

**What ε covers.** Only the private part (the teachers' rows). The query-pool rows are, by PATE's
design, public inputs of the student (trained on them with teacher labels), so they are part of
the Defender (training) set and unprotected; ``describe()["query_rows"]`` lists their positions
in the training arrays. The pool is carved from the Defender set — never from Reserved — so the
LTU utility/privacy evaluation on Reserved data stays honest (Reserved rows are never seen).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize

from privaudit.defenders.base import Defender, WrappingDefender
from privaudit.defenders.registry import make_defender, register
from privaudit.defenders.specs import PateSpec
from privaudit.seeding import draw_seed

_ORDERS = 1.0 + np.geomspace(1e-7, 1e7, 4000)


def rdp_linear_to_dp(rho: float, delta: float) -> float:
    """ε at δ of a mechanism with RDP ε(α) = ρα for all α > 1 (Balle et al. 2020, Thm 21).

    ``ε = min_α ρα + log((α−1)/α) − (log δ + log α)/(α−1)``, minimised over a dense grid of α
    (the same conversion as opacus ``get_privacy_spent``); never above the classical
    ``ρ + 2√(ρ log(1/δ))``.
    """
    if rho < 0 or not 0 < delta < 1:
        raise ValueError(f"need rho >= 0 and 0 < delta < 1, got {rho}, {delta}")
    if rho == 0:
        return 0.0
    a = _ORDERS
    eps = rho * a + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    return float(max(0.0, eps.min()))


def gnmax_epsilon(sigma1: float, sigma2: float, queries: int, delta: float) -> float:
    """Data-independent ε of ``queries`` confident-GNMax queries at δ (RDP ``ρα``, see module doc)."""
    if sigma1 <= 0 or sigma2 <= 0 or queries < 0 or not 0 < delta < 1:
        raise ValueError(f"need sigma1, sigma2 > 0, queries >= 0, 0 < delta < 1; got {sigma1}, {sigma2}, {queries}, {delta}")
    return rdp_linear_to_dp(queries * (1.0 / (2.0 * sigma1**2) + 1.0 / sigma2**2), delta)


@lru_cache(maxsize=256)
def calibrate_sigma2(epsilon: float, delta: float, queries: int, sigma1_over_sigma2: float) -> float:
    """Smallest σ2 (with σ1 = ratio·σ2) whose data-independent ε for ``queries`` is ≤ ``epsilon``."""
    r = sigma1_over_sigma2

    def f(log_s2: float) -> float:
        s2 = math.exp(log_s2)
        return gnmax_epsilon(r * s2, s2, queries, delta) - epsilon

    lo, hi = -10.0, 10.0
    while f(lo) < 0:
        lo -= 10.0
    while f(hi) > 0:
        hi += 10.0
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-10)) * (1.0 + 1e-9)


@register("pate")
class PateDefender(WrappingDefender[PateSpec]):
    """Teachers → confident GNMax → student; the student is saved (in its own format)."""

    def __init__(self, spec: PateSpec, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self.student = make_defender(spec.student.model_copy(update={"name": f"{spec.name}.student"}), n_classes,
                                     device)
        self.model_suffix = self.student.model_suffix  # type: ignore[misc]
        self.stats_: dict[str, Any] = {}

    def released(self) -> Defender[Any]:
        """The student trained on the teachers' noisy answers."""
        return self.student

    def threshold(self) -> float:
        return self.spec.threshold_fraction * self.spec.teachers

    def sigmas(self, queries: int) -> tuple[float, float]:
        """(σ1, σ2) calibrated so that ``queries`` queries cost at most ``epsilon``."""
        s2 = calibrate_sigma2(self.spec.epsilon, self.spec.delta, queries, self.spec.sigma1_over_sigma2)
        return self.spec.sigma1_over_sigma2 * s2, s2

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "PateDefender":
        n, t = len(y), self.spec.teachers
        n_query = int(round(self.spec.query_fraction * n))
        if n_query < 1 or n - n_query < 2 * t:
            raise ValueError(f"defender {self.name!r}: {n} training rows cannot give {t} teachers (>= 2 rows each) "
                             f"and a query pool (query_fraction={self.spec.query_fraction})")
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        query_rows, private_rows = np.sort(perm[:n_query]), perm[n_query:]
        votes = np.zeros((n_query, self.n_classes), dtype=np.int64)
        Xq = X[query_rows]
        for share in np.array_split(private_rows, t):
            teacher = make_defender(self.spec.teacher.model_copy(update={"name": f"{self.name}.teacher"}),
                                    self.n_classes, self.device)
            teacher.fit(X[share], y[share], seed=draw_seed(rng))
            votes[np.arange(n_query), teacher.predict_proba(Xq).argmax(axis=1)] += 1
        sigma1, sigma2 = self.sigmas(n_query)
        confident = votes.max(axis=1) + rng.normal(0.0, sigma1, n_query) >= self.threshold()
        answers = (votes + rng.normal(0.0, sigma2, votes.shape)).argmax(axis=1)
        answered = np.flatnonzero(confident)
        if len(np.unique(answers[answered])) < 2:
            raise ValueError(f"defender {self.name!r}: confident GNMax answered {len(answered)} of {n_query} queries "
                             f"with fewer than 2 distinct labels; raise epsilon, query_fraction or lower threshold_fraction")
        self.student.fit(Xq[answered], answers[answered], seed=draw_seed(rng))
        self.stats_ = {
            "teachers": t, "sigma1": sigma1, "sigma2": sigma2, "threshold": self.threshold(),
            "queries": n_query, "answered": int(len(answered)), "n_private": int(len(private_rows)),
            "query_rows": query_rows.tolist(),
            "answer_accuracy": float(np.mean(answers[answered] == y[query_rows][answered])),
            "ensemble_accuracy": float(np.mean(votes.argmax(axis=1) == y[query_rows])),
            "epsilon_bound": gnmax_epsilon(sigma1, sigma2, n_query, self.spec.delta),
        }
        return self

    def claimed_epsilon(self) -> float | None:
        """The data-independent bound for the queries asked (≤ ``epsilon``); the target before fitting."""
        return float(self.stats_.get("epsilon_bound", self.spec.epsilon))

    def claimed_delta(self) -> float | None:
        return float(self.spec.delta)

    def claimed_mechanism(self) -> Any:
        """μ-GDP with μ = √(2ρ): every query charges a Gaussian mechanism of sensitivity 1 (threshold, σ1) and
        one of L2 sensitivity √2 (GNMax, σ2), so the recipe composes Gaussian mechanisms and is exactly
        μ-GDP with μ² = Q (1/σ1² + 2/σ2²) = 2ρ (Dong, Roth & Su 2022 Thm. 2.7 and Cor. 3.3; its RDP
        bound ρα is this curve's RDP). ``None`` before fitting."""
        if "sigma1" not in self.stats_:
            return None
        from privaudit.claims.mechanisms import GdpMechanism

        s1, s2, q = float(self.stats_["sigma1"]), float(self.stats_["sigma2"]), int(self.stats_["queries"])
        return GdpMechanism(kind="gdp", mu=math.sqrt(q * (1.0 / s1**2 + 2.0 / s2**2)))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **self.stats_,
                "epsilon_analysis": "data-independent RDP bound of confident GNMax (every query charged "
                                    "alpha/(2 sigma1^2) + alpha/sigma2^2); covers the teachers' rows only",
                "privacy_unit": "teacher partition rows; query_rows are the student's public inputs (unprotected)"}
