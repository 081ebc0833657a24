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

Statistics (:mod:`privaudit.stats.claim_runs`, :mod:`privaudit.stats.gdp_runs`): the first
``blackbox.tune_fraction`` of each side's runs chooses a threshold τ; the other runs bound the test's
FPR and FNR by one-sided Clopper-Pearson bounds (each at level/2). Two ε lower bounds, both holding
with probability ≥ 1 − level for **every** mechanism that satisfies the claim as written:

* ``blackbox`` (gated by default) — the bounded point tested against **the claim's own trade-off
  curve** (:mod:`privaudit.stats.tradeoff`; Dong, Roth & Su 2022 f-DP; privacy profiles, Balle et
  al. 2018): the curve of the mechanism the claim declares (``curve``: ``subsampled_gaussian`` for
  ``dp_sgd`` via dp_accounting's PLD, ``gdp`` for PATE, ``laplace``/``gaussian``/``randomized_response``
  /``gdp`` for a ``kind: python`` trainer's ``mechanism``), else the (ε, δ) polygon (``eps_delta``,
  no assumption). ε̂ is the ε at the claim's δ of the least private member of that family the point
  refutes; it exceeds the claim only when the point lies below the claim's own curve.
* ``blackbox_rate`` (diagnostic by default) — **assumption-free**: an (ε, δ)-DP mechanism has
  FPR + e^ε FNR ≥ 1 − δ (Kairouz et al. 2015 Thm. 2.1; Nasr et al. 2023 Eq. 1), so
  ε ≥ log((1 − δ − FNR_U)/FPR_U) (and symmetrically). Valid for any trainer whose runs are
  independent.

Beside them, the **GDP view** (``gdp_epsilon``, a diagnostic, never gated on its own): the point rules
out μ-GDP for μ < μ_L = Φ⁻¹(1 − FPR_U) − Φ⁻¹(FNR_U) and ``gdp_epsilon`` = ε(μ_L, δ) (Dong et al.
Cor. 2.13; Nasr et al. 2023 §5). It bounds ε only for a mechanism whose curve is Gaussian; an exactly
ε-DP Laplace trainer exceeds it routinely. Where it exceeds a claim that declares no mechanism, the
block's ``gdp_warning`` says what it would mean for a Gaussian-noise trainer and how to declare one (the
verdict shows it; it is not a FAIL).

Beside them, for a ``dp_sgd`` recipe, the **last-iterate ceiling** (Steinke et al. 2024, "The Last
Iterate Advantage", arXiv:2410.06186, §3, linear heuristic): the ε that a final-model audit of a
linear model can reach at most, so a reader sees how far the audit got and why a black-box bound
below the claim is not a pass of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.canaries.stats_files import CANARY_FILES, read_canary_meta, read_canary_stats
from privaudit.audits.protocol import PURE_DELTA, AuditBound, AuditInputs, AuditRequest, finite_epsilon
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.claims.claim import PrivacyClaim, claim_family
from privaudit.stats.claim_runs import ClaimRunsBound, certify_claim_scores
from privaudit.stats.gdp_runs import GdpRunsBound, LastIterateCeiling, certify_scores, last_iterate_epsilon
from privaudit.stats.tradeoff import TradeoffFamily

__all__ = ["ASSUMPTION", "CITATION", "SETTINGS", "BlackboxSettings", "THREAT_MODEL", "blackbox_block", "ceiling_for", "gdp_warning",
           "run"]

THREAT_MODEL = ("black-box: final models only, predict_proba (two queries per model); the auditor chooses one "
                "crafted canary row; independent training runs with and without it")
ASSUMPTION = ("eps_lower_bound: none beyond the claim (its declared mechanism's trade-off curve, named in 'curve', "
              "else its (eps, delta) point) and independent runs; eps_lower_bound_rate: none beyond independent runs; "
              "gdp_epsilon (diagnostic): a Gaussian trade-off curve. Each holds with probability >= 1 - level.")

#: the paper and equation of the bounds (the module docstring gives the derivation)
CITATION = ("Nasr et al. 2023, 'Tight Auditing of Differentially Private Machine Learning' §5 (a Clopper-Pearson-"
            "bounded (FPR, FNR) point against a trade-off curve); f-DP: Dong, Roth & Su 2022 Def. 2.1, Prop. 2.12, "
            "Cor. 2.13; privacy profiles: Balle, Barthe & Gaboardi 2018; assumption-free: Kairouz et al. 2015 Thm. 2.1; "
            "ceiling: Steinke et al. 2024 'The Last Iterate Advantage' §3")


def ceiling_for(spec: Any, n_train: int, delta: float) -> LastIterateCeiling | None:
    """The last-iterate heuristic ceiling of a ``dp_sgd`` recipe trained on ``n_train`` rows (``None``: other kinds)."""
    from privaudit.defenders.specs import DpSgdSpec

    if not isinstance(spec, DpSgdSpec):
        return None
    from privaudit.defenders.dp_sgd import dp_sgd_mechanism

    m = dp_sgd_mechanism(spec, n_train)
    return last_iterate_epsilon(m.noise_multiplier, m.sample_rate, m.steps, delta)


def gdp_warning(gdp_eps: float, claim: PrivacyClaim | None) -> str | None:
    """The verdict's warning when the GDP view exceeds a claim that declares no mechanism (``None`` otherwise)."""
    if claim is None or claim.mechanism is not None or not gdp_eps > claim.epsilon:
        return None
    shown = "inf" if gdp_eps >= 1e6 else f"{gdp_eps:.3g}"
    return (f"the GDP view of the black-box runs is {shown} > the claimed epsilon {claim.epsilon:g}: if this trainer "
            f"adds Gaussian noise (a Gaussian trade-off curve, as DP-SGD has), its claim is refuted. For other "
            f"mechanisms (Laplace, randomized response) this number says nothing: declare the mechanism in params.yaml "
            f"(defenders[i].mechanism, README 'Declaring a mechanism') and the gate tests its own curve")


#: what ``detectable_epsilon`` means, recorded beside it in ``metrics/audit.json``
DETECTABLE_MEANING = ("smallest true epsilon (at the claim's delta) this audit detects with probability >= 0.8 at the "
                      "runs it had, for an optimal canary whose scores follow the mechanism's own trade-off curve: "
                      "a lower bound on what a real canary needs (privaudit.stats.detectable)")


def detectable_for(claim: PrivacyClaim | None, family: TradeoffFamily, *, n_in: int, n_out: int, tune_fraction: float,
                   level: float, delta: float) -> dict[str, Any]:
    """``detectable_epsilon`` (and the curve it was computed for) of the gated bound at these sizes; ``None``
    without a finite claim. A subsampled-Gaussian claim is computed for the Gaussian curve with the claim's
    ε at δ (its PLD search would cost tens of seconds per audit; the two curves agree in the bulk where a
    few thousand runs resolve the rates)."""
    from privaudit.stats.detectable import detectable_epsilon_blackbox
    from privaudit.stats.tradeoff import GaussianFamily, SubsampledGaussianFamily

    if claim is None or not math.isfinite(claim.epsilon):
        return {"detectable_epsilon": None}
    fam: TradeoffFamily = family
    if isinstance(family, SubsampledGaussianFamily):
        fam = GaussianFamily(1e-6)  # the search starts from the least private Gaussian whose ε at δ is the claim
    eps = detectable_epsilon_blackbox(fam, claimed_epsilon=float(claim.epsilon), n_in=n_in, n_out=n_out,
                                      tune_fraction=tune_fraction, level=level, delta=delta)
    return {"detectable_epsilon": eps if math.isfinite(eps) else None, "detectable_curve": fam.name,
            "detectable_meaning": DETECTABLE_MEANING}


def detectable_at(request: AuditRequest, runs_per_side: int, tune_fraction: float) -> float | None:
    """The ε this audit of ``request``'s defender would detect with ``runs_per_side`` runs per side
    (:func:`detectable_for`; ``None`` without a finite claim): what the plan stage quotes when a budget
    calls for a smaller audit."""
    delta = request.delta(Neighbourhood.ADD_REMOVE)
    claim = request.claim_for(Neighbourhood.ADD_REMOVE)
    out = detectable_for(claim, claim_family(claim, delta), n_in=runs_per_side, n_out=runs_per_side,
                         tune_fraction=tune_fraction, level=request.level, delta=delta)
    return out["detectable_epsilon"]


def default_runs(spec: DefenderSpecBase, defaults: Mapping[str, int]) -> tuple[str, int | None]:
    """The params key that sets ``spec``'s black-box runs per side and its default (``defaults``: key → the
    code's default, :attr:`privaudit.config.BlackboxParams.default_runs`)."""
    from privaudit.defenders.specs import BATCHED_KINDS

    batched, claims, observable = spec.kind in BATCHED_KINDS, spec.claims_epsilon(), spec.observable_training()
    key = ("runs_no_claim" if not claims else "runs" if batched else "observable_runs" if observable
           else "sequential_runs")
    return f"blackbox.{key}", None if key not in defaults else int(defaults[key])


def reduced_note(request: AuditRequest, runs_per_side: int, detectable: float | None,
                 settings: "BlackboxSettings") -> dict[str, Any] | None:
    """``reduced`` of the block when a defender with an ε claim ran fewer runs per side than the params' default
    (a user who chose a smaller audit to fit ``compute.budget_minutes``): the key, both sizes and both
    detectable ε; ``None`` otherwise."""
    key, default = default_runs(request.spec, settings.default_runs)
    if default is None or runs_per_side >= default or detectable is None:  # no claim: no ε to detect, nothing lost
        return None
    return {"params_key": key, "runs_per_side": runs_per_side, "default_runs_per_side": default,
            "detectable_epsilon": detectable,
            "detectable_epsilon_default": detectable_at(request, default, settings.tune_fraction)}


def blackbox_block(c: ClaimRunsBound, g: GdpRunsBound, r: GdpRunsBound, *, runs_in: int, runs_out: int,
                   tuning: tuple[int, int], ceiling: LastIterateCeiling | None, delta: float, level: float,
                   meta: dict[str, Any], family: TradeoffFamily, warning: str | None) -> dict[str, Any]:
    """The ``blackbox`` block of ``metrics/audit.json`` (``eps_lower_bound`` = the claim's own curve; every
    number the reader needs to judge it: the curve, the point, rates, runs, the GDP view, the ceiling,
    threat model and assumption)."""
    return {
        "eps_lower_bound": finite_epsilon(c.eps_lower_bound)[0],
        "curve": family.name, "curve_description": family.describe(),
        "refutes_claimed_curve": bool(c.point.refutes_claim) if math.isfinite(family.theta_claim) else None,
        "claim_tau": float(c.tau), "claim_fpr_upper": float(c.point.fpr_upper),
        "claim_fnr_upper": float(c.point.fnr_upper),
        "gdp_epsilon": finite_epsilon(g.eps_lower_bound_gdp)[0], "gdp_warning": warning,
        "eps_lower_bound_rate": finite_epsilon(r.eps_lower_bound_rate)[0],
        "mu_lower_bound": float(g.mu_lower_bound),
        "mu_point": float(g.mu_point) if np.isfinite(g.mu_point) else None,
        "delta": delta, "level": level, "neighbourhood": Neighbourhood.ADD_REMOVE,
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


@dataclass(frozen=True)
class BlackboxSettings:
    """The ``blackbox.*`` params the audit reads (the run counts and the canary shape the canaries stage);
    ``default_runs``: the code's default of each runs-per-side key (a smaller audit is said, with its cost)."""

    tune_fraction: float
    default_runs: Mapping[str, int] = field(default_factory=dict)


#: this audit's settings type (:func:`privaudit.audits.protocol.settings_from`)
SETTINGS = BlackboxSettings


def run(request: AuditRequest, inputs: AuditInputs, settings: BlackboxSettings) -> AuditBound:
    """The many-run black-box audit of one defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    Reads ``<canaries>/<defender>/blackbox.npz`` (``score``, ``included``) and ``meta.json``
    (the canary, the Defender-set size) written by the canaries stage; ``settings``: the ``blackbox``
    params block (``tune_fraction``). The gated value is the GDP view (``eps_lower_bound``); the
    assumption-free ``eps_lower_bound_rate`` is the ``blackbox_rate`` bound.
    """
    root = Path(inputs.need_canaries_dir("blackbox")) / request.name
    arrays = read_canary_stats(root / CANARY_FILES["blackbox"], "blackbox")
    score, included = np.asarray(arrays["score"], np.float64), np.asarray(arrays["included"]).astype(bool)
    meta = read_canary_meta(root).get("blackbox", {})
    delta = request.delta(Neighbourhood.ADD_REMOVE)
    s_in, s_out = score[included], score[~included]
    tune = float(settings.tune_fraction)
    g, r, ti, to = certify_scores(s_in, s_out, tune_fraction=tune, level=request.level, delta=max(delta, PURE_DELTA))
    claim = request.claim_for(Neighbourhood.ADD_REMOVE)
    family = claim_family(claim, delta)
    c = certify_claim_scores(s_in, s_out, family, tune_fraction=tune, level=request.level, delta=delta)
    n_train = meta.get("n_train")
    ceiling = ceiling_for(request.spec, int(n_train), max(delta, PURE_DELTA)) if n_train else None
    warning = gdp_warning(g.eps_lower_bound_gdp, claim)
    detectable = detectable_for(claim, family, n_in=int(s_in.size), n_out=int(s_out.size), tune_fraction=tune,
                                level=request.level, delta=delta)
    block = blackbox_block(c, g, r, runs_in=int(s_in.size), runs_out=int(s_out.size), tuning=(ti, to),
                           ceiling=ceiling, delta=delta, level=request.level, meta=meta, family=family,
                           warning=warning)
    block.update(detectable)
    block["reduced"] = reduced_note(request, min(int(s_in.size), int(s_out.size)), detectable["detectable_epsilon"],
                                    settings)
    claimed = request.claim.epsilon if request.claim else None
    ceil = f", last-iterate ceiling {block['ceiling']['eps']:.3f}" if block["ceiling"] else ""
    line = (f"blackbox: {request.name}: eps_hat={block['eps_lower_bound']:.3f} (against the {family.name} curve; "
            f"assumption-free {block['eps_lower_bound_rate']:.3f}; GDP view {block['gdp_epsilon']:.3f}) at "
            f"delta={delta:.3g} from {s_in.size}+{s_out.size} final models{ceil}; claimed {claimed}")
    return AuditBound(epsilon=c.eps_lower_bound, level=request.level, delta=delta, neighbourhood=Neighbourhood.ADD_REMOVE,
                      threat_model=THREAT_MODEL, assumption=ASSUMPTION, diagnostics=block,
                      lines=(line,) + ((f"blackbox: {request.name}: WARNING {warning}",) if warning else ()))
