"""Run the white-box and one-run audits of one defender and turn them into metrics blocks.

The two stages ``whitebox`` and ``one_run`` are glue around :func:`whitebox_block` and
:func:`one_run_block`: each builds the defender's trainer from its validated spec, runs the audit
at the defender's share of ``gate.beta`` and at its claim's δ (converted to the add/remove
neighbourhood both audits test), and returns the block that :func:`privaudit.audit_metrics.assemble_entry`
puts under ``metrics/audit.json[<defender>].whitebox`` / ``.one_run``.

An ε lower bound of +∞ (the white-box audit saw no noise, or reused noise) is recorded as
:data:`EPS_UNBOUNDED` with ``unbounded: true``: JSON has no infinity and the metrics contract
wants finite ε.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privaudit.audit_metrics import audit_delta
from privaudit.claims import PrivacyClaim
from privaudit.defenders.specs import DefenderSpecBase, DpSgdSpec, PythonSpec

__all__ = ["EPS_UNBOUNDED", "one_run_block", "one_run_metrics", "whitebox_block", "whitebox_metrics"]

#: stands for ε̂ = +∞ in the metrics files (any claim is refuted)
EPS_UNBOUNDED = 1.0e6
#: δ used for a pure-ε claim where an audit needs δ > 0 (a bound at a larger δ is smaller, so the
#: bound stays valid for δ = 0)
_PURE_DELTA = 1e-12


def _finite(x: float) -> tuple[float, bool]:
    return (EPS_UNBOUNDED, True) if not math.isfinite(x) or x > EPS_UNBOUNDED else (float(x), False)


def _factory(spec: DefenderSpecBase, n_classes: int, device: str) -> Any:
    from privaudit.defenders.registry import make_defender

    return lambda: make_defender(spec, n_classes=n_classes, device=device)


def whitebox_block(spec: DefenderSpecBase, X: np.ndarray, y: np.ndarray, n_classes: int, *, claim: PrivacyClaim | None,
                   level: float, runs: int, seed: int, default_delta: float, canary_scale: float = 4.0,
                   device: str = "cpu") -> dict[str, Any]:
    """White-box DP-SGD audit (:func:`privaudit.whitebox_audit.whitebox_audit`) of defender ``spec``.

    The trainer is run ``runs`` times on (X, y) — the Defender set the released model is trained
    on — with :func:`privaudit.hooks.watch` recording its opacus ``DPOptimizer``.

    Raises:
        ValueError: the trainer never calls ``privaudit.hooks.watch`` (a ``kind: python`` defender
            declared ``observable: true`` wrongly), naming the defender and the fix.
    """
    from privaudit.hooks import WatchNotCalledError
    from privaudit.whitebox_audit import defender_trainer, whitebox_audit

    delta = audit_delta(claim, "add_remove", default_delta)
    try:
        res = whitebox_audit(defender_trainer(_factory(spec, n_classes, device)), X, y, runs=runs,
                             delta=max(delta, _PURE_DELTA), level=level,
                             accountant=spec.accountant if isinstance(spec, (DpSgdSpec, PythonSpec)) else "prv", seed=seed, canary_scale=canary_scale)
    except WatchNotCalledError as err:
        raise ValueError(f"defender {spec.name!r} declares observable: true but {err}; call "
                         "privaudit.hooks.watch(optimizer, dataset_size=len(X)) in its training loop, or set "
                         f"observable: false") from None
    return whitebox_metrics(res, delta=delta, level=level)


def whitebox_metrics(res: Any, *, delta: float, level: float) -> dict[str, Any]:
    """The ``whitebox`` block of ``metrics/audit.json`` for a :class:`~privaudit.stats.whitebox.WhiteboxResult`
    computed for a claim at ``delta`` (add/remove) and budget share ``level``."""
    eps, unbounded = _finite(res.epsilon)
    failed = [c for c in res.checks if not c.passed]
    return {
        "eps_lower_bound": eps,
        "unbounded": unbounded,
        "eps_point": _finite(res.epsilon_point)[0],
        "delta": delta,
        "neighbourhood": res.neighbourhood,
        "threat_model": res.threat_model,
        "assumption": res.assumption,
        "runs": res.runs,
        "steps": res.total_steps,
        "level": level,
        "accountant": res.accountant,
        "noise_multiplier_upper": _finite(res.noise_multiplier)[0],
        "noise_multiplier_point": _finite(res.noise_multiplier_point)[0],
        "declared_noise_multiplier": res.declared_noise_multiplier,
        "sensitivity": res.sensitivity,
        "sample_rate_lower": res.sample_rate_lower,
        "sample_rate_point": res.sample_rate_point,
        "checks": {c.name: bool(c.passed) for c in res.checks},
        "failed_checks": [_check_reason(c) for c in failed],
        "method": res.epsilon_method,
        "reasons": list(res.reasons),
    }


def _check_reason(check: Any) -> str:
    return f"{check.name}: {check.detail}" if check.detail else check.name


def one_run_block(spec: DefenderSpecBase, X: np.ndarray, y: np.ndarray, n_classes: int, *, claim: PrivacyClaim | None,
                  level: float, seed: int, default_delta: float, canaries: int | str = "auto",
                  device: str = "cpu") -> dict[str, Any]:
    """One-run black-box audit (Steinke et al. 2023; f-DP view of Mahloujifar et al. 2024) of ``spec``.

    Input-space canaries are appended to (X, y) as ordinary rows, so any trainer kind accepts them.
    The gated value is ``eps_lower_bound`` (Steinke et al.'s theorem, no assumption on the trainer);
    the f-DP numbers are shown beside it.
    """
    from privaudit.one_run_audit import one_run_audit

    delta = audit_delta(claim, "add_remove", default_delta)
    make = _factory(spec, n_classes, device)
    res = one_run_audit(lambda Xc, yc, s: make().fit(Xc, yc, s), X, y, n_classes, canaries=canaries, level=level,
                        delta=max(delta, _PURE_DELTA), seed=seed, method="fdp")
    return one_run_metrics(res, delta=delta, level=level)


def one_run_metrics(res: Any, *, delta: float, level: float) -> dict[str, Any]:
    """The ``one_run`` block of ``metrics/audit.json`` for a :class:`~privaudit.one_run_audit.OneRunResult`
    computed for a claim at ``delta`` (add/remove) and budget share ``level``."""
    # wall time is not a metric: it would make metrics/audit.json differ between identical runs
    block = {k: v for k, v in res.as_dict().items() if k not in ("grid", "seconds")}
    block.update(eps_lower_bound=_finite(res.eps_lower_bound)[0], delta=delta, level=level,
                 grid=[list(g) for g in res.grid])
    # the GDP-shaped number is not a bound on an (ε, δ) claim: keep it out of the eps_* namespace
    block["gdp_epsilon"] = block.pop("eps_lower_bound_fdp", None)
    if block.get("eps_lower_bound_fdp_curve") is not None:
        block["eps_lower_bound_fdp_curve"] = _finite(block["eps_lower_bound_fdp_curve"])[0]
    return block
