"""The many-run black-box audit of any trainer: final models only, one crafted canary, many runs.

Threat model: the auditor sees only the released model's ``predict_proba`` (two queries per model)
and chooses one training example, the canary (add/remove neighbourhood: a run trains on the
Defender set D or on D ∪ {canary}). The canaries stage trains ``2 × blackbox.runs`` models of the
defender's recipe (``sequential_runs`` for a claiming trainer without a batched recipe: ``kind:
python``, ``pate``; ``runs_no_claim`` for a defender without a DP claim), half with the canary, and keeps each final model's
score (:mod:`privaudit.canaries.blackbox_trials`). The canary is crafted for the recipe in feature
space (:mod:`privaudit.canaries.crafted`: the data's least-used direction, Jagielski et al. 2020
§4's ClipBKD idea; its score is the change of the canary's centered log-probabilities along its
label, which for a linear head is exactly its weight along that direction, Steinke et al. 2024 §3).

Statistics (:mod:`privaudit.stats.gdp_runs`): the first ``blackbox.tune_fraction`` of each side's
runs chooses a threshold τ; the other runs bound the test's FPR and FNR by one-sided
Clopper-Pearson bounds (each at level/2). Two ε lower bounds, both holding with probability
≥ 1 − level:

* ``blackbox`` (gated by default) — **GDP view** (Dong, Roth & Su 2022, Def. 2.6 and Cor. 2.13; the
  auditing conversion of Nasr et al. 2023, "Tight Auditing of DP ML", §5): the bounded point rules
  out μ-GDP for μ < μ_L = Φ⁻¹(1 − FPR_U) − Φ⁻¹(FNR_U), and ε̂ = ε(μ_L, δ) of a μ_L-GDP mechanism
  (Dong et al. Cor. 2.13). **Assumption**: the recipe's trade-off curve between "canary in" and
  "canary out" is Gaussian (exact for the Gaussian mechanism; for DP-SGD the CLT of Dong et al.
  Thm. 3.5). Its validity for honest DP-SGD claims is tested by simulation
  (``benchmarks/bench_blackbox_honest.py``, ``tests/blackbox/test_honest_claims.py``).
* ``blackbox_rate`` (diagnostic by default) — **assumption-free**: an (ε, δ)-DP mechanism has
  FPR + e^ε FNR ≥ 1 − δ (Kairouz et al. 2015 Thm. 2.1; Nasr et al. 2023 Eq. 1), so
  ε ≥ log((1 − δ − FNR_U)/FPR_U) (and symmetrically). Valid for any trainer whose runs are
  independent; weaker.

Beside them, for a ``dp_sgd`` recipe, the **last-iterate ceiling** (Steinke et al. 2024, "The Last
Iterate Advantage", arXiv:2410.06186, §3, linear heuristic): the ε that a final-model audit of a
linear model can reach at most, so a reader sees how far the audit got and why a black-box bound
below the claim is not a pass of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from privaudit.artifacts import read_json
from privaudit.audits.protocol import PURE_DELTA, AuditBound, AuditInputs, AuditRequest, finite_epsilon
from privaudit.stats.gdp_runs import GdpRunsBound, LastIterateCeiling, certify_scores, last_iterate_epsilon

__all__ = ["ASSUMPTION", "CITATION", "THREAT_MODEL", "blackbox_block", "ceiling_for", "run"]

THREAT_MODEL = ("black-box: final models only, predict_proba (two queries per model); the auditor chooses one "
                "crafted canary row; independent training runs with and without it")
ASSUMPTION = ("eps_lower_bound (GDP view): the recipe's trade-off curve between canary in and canary out is "
              "Gaussian (mu-GDP for some mu; Dong, Roth & Su 2022), tested for honest DP-SGD claims by simulation; "
              "eps_lower_bound_rate: none beyond independent runs. Each holds with probability >= 1 - level.")

#: the paper and equation of the bounds (the module docstring gives the derivation)
CITATION = ("Nasr et al. 2023, 'Tight Auditing of Differentially Private Machine Learning' §5 (GDP conversion of a "
            "Clopper-Pearson-bounded (FPR, FNR) point; Dong, Roth & Su 2022 Cor. 2.13); assumption-free: Kairouz et "
            "al. 2015 Thm. 2.1; ceiling: Steinke et al. 2024 'The Last Iterate Advantage' §3")


def ceiling_for(spec: Any, n_train: int, delta: float) -> LastIterateCeiling | None:
    """The last-iterate heuristic ceiling of a ``dp_sgd`` recipe trained on ``n_train`` rows (``None``: other kinds)."""
    from privaudit.defenders.specs import DpSgdSpec

    if not isinstance(spec, DpSgdSpec):
        return None
    from privaudit.defenders.dp_sgd import noise_multiplier

    return last_iterate_epsilon(float(noise_multiplier(spec, n_train)), spec.sample_rate(n_train),
                                spec.steps(n_train), delta)


def blackbox_block(g: GdpRunsBound, r: GdpRunsBound, *, runs_in: int, runs_out: int, tuning: tuple[int, int],
                   ceiling: LastIterateCeiling | None, delta: float, level: float,
                   meta: dict[str, Any]) -> dict[str, Any]:
    """The ``blackbox`` block of ``metrics/audit.json`` (``eps_lower_bound`` = GDP view; every number the
    reader needs to judge it: rates, runs, the ceiling, threat model and assumption)."""
    return {
        "eps_lower_bound": finite_epsilon(g.eps_lower_bound_gdp)[0],
        "eps_lower_bound_rate": finite_epsilon(r.eps_lower_bound_rate)[0],
        "mu_lower_bound": float(g.mu_lower_bound),
        "mu_point": float(g.mu_point) if np.isfinite(g.mu_point) else None,
        "delta": delta, "level": level, "neighbourhood": "add_remove",
        "threat_model": THREAT_MODEL, "assumption": ASSUMPTION,
        "runs_in": runs_in, "runs_out": runs_out, "tuning_in": tuning[0], "tuning_out": tuning[1],
        "tau": float(g.tau), "false_positives": g.false_positives, "false_negatives": g.false_negatives,
        "fpr_upper": float(g.fpr_upper), "fnr_upper": float(g.fnr_upper),
        "rate_tau": float(r.tau), "rate_fpr_upper": float(r.fpr_upper), "rate_fnr_upper": float(r.fnr_upper),
        "canary": meta.get("canary"),
        "ceiling": None if ceiling is None else {
            "eps": float(ceiling.eps_exact), "eps_gdp": float(ceiling.eps_gdp), "mu": float(ceiling.mu),
            "method": ceiling.method},
    }


def run(request: AuditRequest, inputs: AuditInputs, settings: Any) -> AuditBound:
    """The many-run black-box audit of one defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    Reads ``<canaries>/<defender>/blackbox.npz`` (``score``, ``included``) and ``meta.json``
    (the canary, the Defender-set size) written by the canaries stage; ``settings``: the ``blackbox``
    params block (``tune_fraction``). The gated value is the GDP view (``eps_lower_bound``); the
    assumption-free ``eps_lower_bound_rate`` is the ``blackbox_rate`` bound.
    """
    root = Path(inputs.need_canaries_dir("blackbox")) / request.name
    path = root / "blackbox.npz"
    if not path.is_file():
        raise ValueError(f"{path} is missing: the canaries stage ran without black-box runs for defender "
                         f"{request.name!r}; rerun it (dvc repro canaries)")
    with np.load(path, allow_pickle=False) as z:
        score, included = np.asarray(z["score"], np.float64), np.asarray(z["included"]).astype(bool)
    meta = read_json(root / "meta.json").get("blackbox", {})
    delta = request.delta("add_remove")
    s_in, s_out = score[included], score[~included]
    g, r, ti, to = certify_scores(s_in, s_out, tune_fraction=float(settings.tune_fraction), level=request.level,
                                  delta=max(delta, PURE_DELTA))
    n_train = meta.get("n_train")
    ceiling = ceiling_for(request.spec, int(n_train), max(delta, PURE_DELTA)) if n_train else None
    block = blackbox_block(g, r, runs_in=int(s_in.size), runs_out=int(s_out.size), tuning=(ti, to), ceiling=ceiling,
                           delta=delta, level=request.level, meta=meta)
    claimed = request.claim.epsilon if request.claim else None
    ceil = f", last-iterate ceiling {block['ceiling']['eps']:.3f}" if block["ceiling"] else ""
    line = (f"blackbox: {request.name}: eps_hat={block['eps_lower_bound']:.3f} (GDP view; assumption-free "
            f"{block['eps_lower_bound_rate']:.3f}) at delta={delta:.3g} from {s_in.size}+{s_out.size} final models"
            f"{ceil}; claimed {claimed}")
    return AuditBound(epsilon=g.eps_lower_bound_gdp, level=request.level, delta=delta, neighbourhood="add_remove",
                      threat_model=THREAT_MODEL, assumption=ASSUMPTION, diagnostics=block, lines=(line,))
