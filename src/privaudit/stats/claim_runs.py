"""Many-run black-box statistics tested against a claim's own trade-off curve.

The runs are those of :mod:`privaudit.stats.gdp_runs` (``n_in`` final models with the canary,
``n_out`` without, one score each). A threshold τ is chosen on the tuning runs only; at τ the
certification runs bound the test's rates, FPR ≤ FPR_U and FNR ≤ FNR_U jointly with probability
≥ 1 − level (one-sided Clopper-Pearson, each at level/2). The point is then tested against the
claim's family (:func:`privaudit.stats.tradeoff.refute_point`): it refutes the claim's own curve
with probability ≤ level for *every* mechanism that satisfies the claim (the module docstring of
:mod:`privaudit.stats.tradeoff` gives the one-line proof), and ε̂ is the ε at the claim's δ of the
least private member it refutes.

τ is chosen by :func:`~privaudit.stats.gdp_runs.select_threshold_runs` on the tuning runs: with the
rate objective for the (ε, δ) polygon (its ε̂ is then exactly the assumption-free bound), with the
smoothed GDP objective for every curved family (the curves of DP mechanisms are close to Gaussian
in the bulk where a few thousand runs resolve the rates; judging two candidate thresholds by the
family's ε̂ on raw tuning counts instead was measured to pick the worse one often: mean ε̂/ε 0.07
against 0.27 on the digits DP-SGD head at ε = 1). τ is a function of the tuning runs only, so the
certification stays exact whatever the family.

numpy/scipy only; imports nothing from privaudit but other ``stats`` modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._checks import check_prob
from .gdp_runs import certify_threshold_runs, select_threshold_runs
from .tradeoff import EpsDeltaFamily, RefutedPoint, TradeoffFamily, refute_point

__all__ = ["ClaimRunsBound", "certify_claim_scores"]


@dataclass(frozen=True)
class ClaimRunsBound:
    """A certified point tested against a claim's family (:func:`certify_claim_scores`)."""

    tau: float
    false_positives: int
    false_negatives: int
    n_in: int
    n_out: int
    point: RefutedPoint
    curve: str
    level: float
    delta: float

    @property
    def eps_lower_bound(self) -> float:
        """ε̂: the ε at δ of the least private member of the claim's family the point refutes."""
        return self.point.epsilon


def certify_claim_scores(s_in: ArrayLike, s_out: ArrayLike, family: TradeoffFamily, *, tune_fraction: float,
                         level: float, delta: float) -> ClaimRunsBound:
    """Choose τ on the first ``tune_fraction`` of each side, certify (FPR_U, FNR_U) on the rest, and
    test the point against ``family`` (the claim's curves) at the claim's ``delta``.

    >>> from privaudit.stats.tradeoff import EpsDeltaFamily, LaplaceFamily
    >>> rng = np.random.default_rng(0)  # Laplace mechanism with eps0 = 1: honest, not refuted
    >>> s_out, s_in = rng.laplace(0, 1, 4000), rng.laplace(1, 1, 4000)
    >>> b = certify_claim_scores(s_in, s_out, LaplaceFamily(1.0), tune_fraction=0.2, level=0.05, delta=0.0)
    >>> b.point.refutes_claim, 0.5 < b.eps_lower_bound <= 1.0
    (False, True)
    >>> b2 = certify_claim_scores(s_in, s_out, LaplaceFamily(0.5), tune_fraction=0.2, level=0.05, delta=0.0)
    >>> b2.point.refutes_claim  # a claim of eps0 = 0.5 is refuted
    True
    """
    level = check_prob("level", level, open_low=True, open_high=True)
    delta = check_prob("delta", delta, open_high=True)
    # every score is checked finite by the two gdp_runs calls below (a NaN would sort last and count as a detection)
    si, so = np.asarray(s_in, np.float64).ravel(), np.asarray(s_out, np.float64).ravel()
    ti, to = int(si.size * tune_fraction), int(so.size * tune_fraction)
    if ti < 1 or to < 1 or ti >= si.size or to >= so.size:
        raise ValueError(f"{si.size} / {so.size} runs cannot be split at tune_fraction={tune_fraction}")
    ci, co = si.size - ti, so.size - to
    tune_in, tune_out = si[:ti], so[:to]
    kw = dict(level=level, delta=max(delta, 1e-300), certify_in=ci, certify_out=co)
    if isinstance(family, EpsDeltaFamily):
        best_tau = select_threshold_runs(tune_in, tune_out, objective="rate", **kw).tau
    else:
        best_tau = select_threshold_runs(tune_in, tune_out, objective="gdp", smooth=True, **kw).tau
    # the certified rates at τ (one-sided Clopper-Pearson, level/2 each); only its rates are used here, so its
    # own δ (which must be > 0) does not matter
    cert = certify_threshold_runs(si[ti:], so[to:], best_tau, level=level, delta=max(delta, 1e-12))
    point = refute_point(family, cert.fpr_upper, cert.fnr_upper, delta)
    return ClaimRunsBound(tau=float(best_tau), false_positives=cert.false_positives,
                          false_negatives=cert.false_negatives, n_in=ci, n_out=co, point=point, curve=family.name,
                          level=level, delta=delta)
