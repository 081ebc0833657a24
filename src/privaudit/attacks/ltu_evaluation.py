"""LTU attacker registry (``ltu.attackers``) and the per-defender evaluation (Pedersen et al. 2022).

Names follow the taxonomy of Fig. 2:

========================  ===========================================================
``loss_gap``              (1) Gap-attacker: lower loss → member (Theorem 1 with f = loss)
``score_<f>``             (1) Theorem 1 with f ∈ {loss, confidence, entropy, margin}
``score_best``            (1) Theorem 1, f chosen per round on D_A
``bounded_loss``          (1) Theorem 2 randomized strategy on ℓ̃ = 1 − p_y
``learned``               (2) M_A on M_D's outputs, trained on D_A (``ltu.learned_mode``)
``retrain``               (3) mock defenders with T_D (Theorem 3), used for Table 1
``gradient``              (4) white-box gradient norms (torch heads, logistic regression)
``lira``, ``rmia``        offline LiRA / RMIA with Reserved-side reference models
========================  ===========================================================

Besides the attackers' results, :func:`evaluate_defender` computes (with ``risk`` options) the
per-sample privacy risk of :mod:`privaudit.attacks.sample_risk`: an online-LiRA likelihood
ratio per sample with a p-value against reference models that never saw it, and the Defender
samples significant after a multiplicity correction (the report's "most exposed" list).
"""

from __future__ import annotations

import time

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np
import pandas as pd

from privaudit.attacks.ltu import (
    AttackTable,
    LtuAttacker,
    LtuData,
    LtuResult,
    RoundBatch,
    RoundTruth,
    individual_privacy_scores,
    run_attacker,
    strongest,
)
from privaudit.attacks.ltu_gradient import GradientAttacker, NotApplicable
from privaudit.attacks.ltu_learned import LearnedAttacker, crossfit_scores
from privaudit.attacks.ltu_retrain import RetrainAttacker
from privaudit.attacks.ltu_roc import roc_summary
from privaudit.attacks.ltu_scores import BestScoreAttacker, BoundedLossAttacker, ScoreAttacker, bounded_loss
from privaudit.attacks.mia_lira import LiraAttacker
from privaudit.attacks.mia_rmia import RmiaAttacker
from privaudit.attacks.sample_risk import RiskOptions, SampleRisk, sample_risk
from privaudit.stats import ltu_theorem1_bound, ltu_theorem2_bound
from privaudit.seeding import draw_seed
from privaudit.losses import cross_entropy


@dataclass(frozen=True)
class AttackerOptions:
    """Per-attacker settings (from ``ltu.*`` params)."""

    n_jobs: int | Literal["auto"] = "auto"
    reference_models: int = 8
    reference_fraction: float = 0.5
    learned_mode: str = "one_split"
    rmia_a: float = 0.33
    rmia_gamma: float = 1.0
    #: where ``retrain`` trains its batched mock heads (torch_mlp / dp_sgd defenders)
    device: str = "cpu"


ATTACKERS: dict[str, Callable[[AttackerOptions], LtuAttacker]] = {
    "loss_gap": lambda o: ScoreAttacker("loss_gap", "loss"),
    "score_loss": lambda o: ScoreAttacker("score_loss", "loss"),
    "score_confidence": lambda o: ScoreAttacker("score_confidence", "confidence"),
    "score_entropy": lambda o: ScoreAttacker("score_entropy", "entropy"),
    "score_margin": lambda o: ScoreAttacker("score_margin", "margin"),
    "score_best": lambda o: BestScoreAttacker(),
    "bounded_loss": lambda o: BoundedLossAttacker(),
    "learned": lambda o: LearnedAttacker(o.learned_mode),
    "retrain": lambda o: RetrainAttacker(o.n_jobs, device=o.device),
    "gradient": lambda o: GradientAttacker(),
    "lira": lambda o: LiraAttacker(o.reference_models, o.reference_fraction, o.n_jobs, o.device),
    "rmia": lambda o: RmiaAttacker(o.reference_models, o.reference_fraction, o.rmia_a, o.rmia_gamma, o.n_jobs,
                                   o.device),
}

#: attackers that need the features / trainer (the ltu stage then loads features and split)
NEEDS_FEATURES = frozenset({"retrain", "lira", "rmia", "gradient"})


def check_attacker_names(names: Sequence[str]) -> None:
    """Raise ValueError naming ``ltu.attackers`` and the unknown or repeated entry.

    The same names are accepted by ``privaudit.config`` (``ATTACKER_NAMES``, a torch-free copy that
    ``tests/attacks/test_ltu_evaluation.py`` keeps equal to :data:`ATTACKERS`); attacks import no config.
    """
    for n in names:
        if n not in ATTACKERS:
            raise ValueError(f"ltu.attackers: unknown attacker {n!r}; allowed: {sorted(ATTACKERS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"ltu.attackers lists an attacker twice: {list(names)}")


def make_attacker(name: str, options: AttackerOptions | None = None) -> LtuAttacker:
    check_attacker_names([name])
    return ATTACKERS[name](options or AttackerOptions())


def _sample_scores(attacker: LtuAttacker, batch: RoundBatch, truth: RoundTruth, data: LtuData,
                   seed: int) -> np.ndarray | None:
    """(n,) per-sample membership scores in data row order, or None when the attacker has none."""
    table: AttackTable = batch.table
    if isinstance(attacker, LearnedAttacker):
        return crossfit_scores(data.proba, data.y, data.is_defender, seed)
    if isinstance(attacker, RmiaAttacker):
        pop = np.flatnonzero(~data.is_defender[truth.perm])
        s_tab = attacker.sample_scores(table, pop)
    elif hasattr(attacker, "sample_scores"):
        s_tab = attacker.sample_scores(table)  # type: ignore[attr-defined]
    else:
        return None
    out = np.empty(len(s_tab))
    out[truth.perm] = s_tab
    return out


@dataclass
class DefenderEvaluation:
    """All LTU results for one defender."""

    results: dict[str, LtuResult]
    not_applicable: dict[str, str]
    roc: dict[str, dict[str, Any]]
    scores: pd.DataFrame
    bounds: dict[str, Any]
    individual_attacker: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: per-sample risk (:mod:`privaudit.attacks.sample_risk`), None when not computed
    risk: SampleRisk | None = None
    #: why the per-sample risk was not computed (None when computed or not asked for)
    risk_skipped: str | None = None

    @property
    def best(self) -> LtuResult:
        return strongest(self.results)

    def metrics(self, utility: float, utility_stderr: float) -> dict[str, Any]:
        """The ``metrics/ltu.json`` entry: strongest attacker at the top, all under ``attackers``."""
        best = self.best
        low = max(self.bounds["theorem1"], self.bounds["theorem2"])
        below = best.accuracy < low - 2 * best.accuracy_stderr
        return {
            **{k: v for k, v in best.as_dict().items() if not isinstance(v, (dict, list))},
            "utility": utility,
            "utility_stderr": utility_stderr,
            "theorem1_bound": self.bounds["theorem1"],
            "theorem2_bound": self.bounds["theorem2"],
            "bounded_loss": self.bounds["bounded_loss"],
            "below_theorem_bound": bool(below),
            **({"warning": "empirical accuracy below the theorem's lower bound (a bug)"} if below else {}),
            "individual_scores_attacker": self.individual_attacker,
            "attackers": {a: r.as_dict() for a, r in self.results.items()},
            **({"not_applicable": self.not_applicable} if self.not_applicable else {}),
            **({"sample_risk": self.risk.summary()} if self.risk is not None else {}),
            **({"sample_risk": {"not_computed": self.risk_skipped}} if self.risk_skipped else {}),
        }


def theorem_bounds(data: LtuData) -> dict[str, Any]:
    """Theorem 1 (f = cross-entropy) and Theorem 2 (ℓ̃ = 1 − p_y ∈ [0, 1]) lower bounds on A_ltu."""
    loss = cross_entropy(data.proba, data.y)
    bl = bounded_loss(data.proba, data.y)
    d = data.is_defender
    return {"theorem1": ltu_theorem1_bound(loss[~d], loss[d]),
            "theorem2": ltu_theorem2_bound(bl[~d], bl[d]),
            "bounded_loss": "1 - p_y(x) = 1 - exp(-cross_entropy), in [0, 1]"}


def _annotate_expected(res: LtuResult, bounds: dict[str, Any]) -> None:
    """loss_gap / bounded_loss achieve the Theorem 1 / 2 value in expectation: compare within 2 stderr."""
    key = {"loss_gap": "theorem1", "score_loss": "theorem1", "bounded_loss": "theorem2"}.get(res.attacker)
    if key is None:
        return
    expected = bounds[key]
    res.extra["expected_accuracy"] = expected
    res.extra["below_expected"] = bool(res.accuracy < expected - 2 * res.accuracy_stderr)


def evaluate_defender(data: LtuData, rounds: int, attackers: list[str], rng: np.random.Generator,
                      options: AttackerOptions | None = None, risk: RiskOptions | None = None,
                      progress: Callable[[str], None] | None = None) -> DefenderEvaluation:
    """Run every attacker of ``attackers`` for ``rounds`` LTU rounds against one defender.

    ``progress`` (optional) is called with one line after each attacker (its accuracy and wall
    time), so a long attacker such as ``retrain`` does not leave the caller silent.

    Returns results (Eq. 1 per attacker), attackers not applicable (with the reason), ROC data
    of the attackers with per-sample scores, individual privacy scores (App. C) of the
    strongest such attacker (exact pairwise, id/role/score), and the Theorem 1/2 bounds.
    With ``risk``, also the per-sample privacy risk (:func:`privaudit.attacks.sample_risk.sample_risk`,
    its own random stream drawn after the attackers'), merged into ``scores`` (columns
    :data:`~privaudit.attacks.sample_risk.RISK_COLUMNS`) and summarised under ``sample_risk``;
    a defender without spec or features records why it was skipped.
    """
    check_attacker_names(attackers)
    options = options or AttackerOptions()
    bounds = theorem_bounds(data)
    results: dict[str, LtuResult] = {}
    skipped: dict[str, str] = {}
    roc: dict[str, dict[str, Any]] = {}
    per_sample: dict[str, np.ndarray] = {}
    for name in attackers:
        attacker = make_attacker(name, options)
        sub = np.random.default_rng(rng.integers(2**63))
        started = time.perf_counter()
        try:
            res, batch, truth = run_attacker(attacker, data, rounds, sub)
        except NotApplicable as err:
            skipped[name] = f"not applicable: {err}"
            if progress is not None:
                progress(f"attacker {name}: skipped ({err})")
            continue
        if progress is not None:
            progress(f"attacker {name}: accuracy {res.accuracy:.3f} over {rounds} rounds "
                     f"({time.perf_counter() - started:.1f} s)")
        _annotate_expected(res, bounds)
        results[name] = res
        s = _sample_scores(attacker, batch, truth, data, draw_seed(sub))
        if s is not None and np.all(np.isfinite(s)):
            per_sample[name] = s
            summary = roc_summary(s, data.is_defender)
            roc[name] = summary
            res.extra.update({k: summary[k] for k in ("auc", "tpr_at_0_1pct", "tpr_at_1pct")})
    if not results:
        raise ValueError(f"none of ltu.attackers {attackers} applies to this defender: {skipped}")
    if not per_sample:  # individual scores always available from the loss gap (exact, App. C)
        att = ScoreAttacker("loss_gap", "loss")
        per_sample["loss_gap"] = att.sample_scores(AttackTable(data.X, data.y, data.proba, np.zeros(0), data.n_classes,
                                                               None, None, rng))
    ind = max(per_sample, key=lambda a: (results[a].accuracy if a in results else 0.0, a))
    s = per_sample[ind]
    d = data.is_defender
    sd, sr = individual_privacy_scores(s[d], s[~d])
    scores = pd.DataFrame({
        "id": np.concatenate([data.ids[d], data.ids[~d]]),
        "role": ["defender"] * int(d.sum()) + ["reserved"] * int((~d).sum()),
        "score": np.concatenate([sd, sr]),
    })
    ev = DefenderEvaluation(results, skipped, roc, scores, bounds, ind)
    if risk is not None:
        risk_rng = np.random.default_rng(rng.integers(2**63))
        if data.spec is None or data.X.shape[1] == 0:
            ev.risk_skipped = "needs the defender spec and the features (reference models)"
        else:
            ev.risk = sample_risk(data, risk_rng, risk)
            frame = ev.risk.frame(data.ids, d)
            if not np.array_equal(frame["id"].to_numpy(), scores["id"].to_numpy()):
                raise AssertionError("per-sample risk rows do not line up with the individual scores")
            ev.scores = pd.concat([scores, frame.drop(columns="id")], axis=1)
    return ev
