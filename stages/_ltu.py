"""The LTU stage's attacker and per-sample-risk settings from ``ltu.*`` params (the ltu stage runs them; the plan
stage times them before the LTU stage has ever run)."""

from __future__ import annotations

from privaudit.attacks.ltu_evaluation import AttackerOptions
from privaudit.attacks.sample_risk import RiskOptions
from privaudit.config import Params


def ltu_options(params: Params, device: str) -> tuple[AttackerOptions, RiskOptions | None]:
    """(attacker options, per-sample risk options or None when ``ltu.risk_reference_models`` is 0)."""
    lp = params.ltu
    options = AttackerOptions(n_jobs=lp.workers(), reference_models=lp.reference_models,
                              reference_fraction=lp.reference_fraction, learned_mode=lp.learned_mode,
                              rmia_a=lp.rmia_a, rmia_gamma=lp.rmia_gamma, device=device)
    risk = (RiskOptions(reference_models=lp.risk_reference_models, level=lp.risk_level,
                        correction=lp.risk_correction, n_jobs=lp.workers(), device=device)
            if lp.risk_reference_models else None)
    return options, risk
