"""Stage plan: before any expensive stage, what the audit will cost → ``data/plan/`` (sizes) and a printed plan.

The sizes (``data/plan/sizes.json``: black-box runs per side) come from the params only. The estimate, per
defender and stage: the calls of its trainer at the measured cost per call (``data/.timings/fits.json``,
timed by the defenders stage after each release fit) plus each stage's fixed cost (its last recorded wall
minus the fits planned for it, ``data/.timings/stages.json``; before a stage's first run, the defenders stage's
measured start-up, plus for the LTU stage its scoring timed here on synthetic data of the audit's shapes,
``privaudit.planning.ltu_scoring``); ``privaudit.planning.cost``. Over
``compute.budget_minutes``: exit 1 with one line naming the estimate, the budget, the largest
``blackbox.sequential_runs`` that would fit with the ε it could still detect, and the command; nothing written.

Outputs: ``data/plan/`` (``privaudit.planning.plan_files``). The estimate with its times goes
to ``data/.timings/plan.json`` (outside DVC: a measurement, not a result; the progress lines' ETA reads it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.config import Params
from privaudit.defenders.info_file import read_defender_info
from privaudit.defenders.specs import BATCHED_KINDS
from privaudit.planning.cost import STAGE_STARTUP_S, AuditSizes, DefenderInput, FitRate, plan_audit
from privaudit.planning.plan_files import write_plan_files
from privaudit.planning.timings import DEFAULT_TIMINGS, fit_key, read_fit_times, read_heavy_startup, read_stage_walls
from privaudit.repro.user_code import user_code_digests
from stages._runner import run_stage

if TYPE_CHECKING:
    from privaudit.features.feature_set import FeatureShape
    from privaudit.audits.protocol import AuditRequest

#: the attackers whose reference models are fits of the defender's own trainer
REFERENCE_ATTACKERS = ("lira", "rmia")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--features", type=Path, default=Path("data/features"),
                   help="features (its meta.json: the dimension that sizes one_run.canaries: auto)")
    p.add_argument("--timings", type=Path, default=DEFAULT_TIMINGS)
    p.add_argument("--out", type=Path, default=Path("data/plan"))


def sizes_of(params: Params, device: str | None = None) -> AuditSizes:
    """The sizes the params fix (module docstring of ``privaudit.planning.cost``); ``device``: where the fits were
    timed (default ``base.device``), which decides how fast a worker pool starts
    (:func:`privaudit.repro.worker_pool.pool_startup_seconds`)."""
    from privaudit.audits.protocol import trainer_audit_workers
    from privaudit.repro.worker_pool import pool_startup_seconds

    lp, lidp = params.ltu, params.lidp
    budget = params.compute.budget_minutes
    return AuditSizes(
        reference_models=lp.reference_models if set(REFERENCE_ATTACKERS) & set(lp.attackers) else 0,
        reference_fraction=lp.reference_fraction, risk_reference_models=lp.risk_reference_models,
        retrain_mocks=2 * lp.rounds if "retrain" in lp.attackers else 0, ltu_jobs=lp.workers(),
        game3_runs=params.game3.runs, lidp_trials=lidp.trials,
        lidp_models_per_trial=1 if lidp.neighbourhood == "replace_one" else 2, lidp_canaries=lidp.k_canaries(),
        block_trials=params.compute.block_trials, blackbox_block=params.blackbox.block,
        canary_jobs=params.compute.workers(), whitebox_runs=params.whitebox.runs,
        whitebox_jobs=trainer_audit_workers(device or params.base.device, params.compute.workers()),
        budget_seconds=None if budget is None else 60.0 * budget,
        pool_startup_s=pool_startup_seconds(device or params.base.device))


def _detectable(params: Params, defenders: Path):  # type: ignore[no-untyped-def]
    """``(defender, runs per side) → ε`` the black-box audit would detect (the over-budget message)."""
    def at(name: str, runs: int) -> float | None:
        from privaudit.audits.blackbox import detectable_at
        from privaudit.audits.runner import AuditPlan, audit_request

        plan = AuditPlan.of("blackbox", params)
        spec = next(s for s in plan.defenders if s.name == name)
        request = audit_request(plan, spec, defenders)
        return None if request is None else detectable_at(request, runs, params.blackbox.tune_fraction)
    return at


def _ltu_scoring(params: Params, defenders: Path, shape: "FeatureShape | None") -> tuple[float, str] | None:
    """The LTU stage's work besides fits, timed on synthetic data of its shapes (for a stage that has not run);
    with the features' dimension (``shape``; None: unknown) also the gradient attacker's pass per defender."""
    from privaudit.planning.ltu_scoring import time_gradient_pass, time_ltu_scoring
    from stages._ltu import ltu_options

    if not params.defenders:
        return None
    spec = params.defenders[0]
    info = read_defender_info(defenders, spec.name)
    options, risk = ltu_options(params, "cpu")
    n_defender, n_classes = max(2, info.n_defender), max(2, int(info.raw.get("n_classes") or 2))
    n_reserved = max(2, int(info.raw.get("n_reserved") or info.n_defender))
    attackers, gradient, said = list(params.ltu.attackers), 0.0, ""
    try:
        if "gradient" in attackers and shape is not None:
            d = shape.dim
            gradient = sum(time_gradient_pass(s, n_rows=n_defender + n_reserved, d=d, n_classes=n_classes,
                                              seed=params.base.seed) for s in params.defenders)
            attackers.remove("gradient")
            said = f" + the gradient attacker's passes, {gradient:.2g} s measured (random weights, {d} features)"
        t = time_ltu_scoring(spec, n_defender=n_defender, n_reserved=n_reserved, n_classes=n_classes,
                             rounds=params.ltu.rounds, attackers=attackers, options=options, risk=risk,
                             seed=params.base.seed)
    except (ValueError, KeyError) as err:  # an estimate, not a check: the LTU stage itself refuses what it cannot run
        return 0.0, f"its scoring not timed ({err})"
    k = len(params.defenders)
    return t.seconds * k + gradient, f"its scoring, {k} x {t.seconds:.2g} s measured ({t.timed_by}){said}"


def _requests(audit: str, params: Params, defenders: Path) -> list["AuditRequest"]:
    """The requests of audit ``audit`` for every defender it applies to (as its stage makes them)."""
    from privaudit.audits.runner import AuditPlan, audit_request

    plan = AuditPlan.of(audit, params)
    return [r for spec in plan.defenders if (r := audit_request(plan, spec, defenders)) is not None]


def _one_run_work(params: Params, defenders: Path, shape: "FeatureShape | None",
                  shape_error: str) -> tuple[float, str] | None:
    """The one-run stage's work besides its training runs, timed on synthetic scores (for a stage that has not
    run); None when the audit applies to no defender. ``shape``: the features' (None: unreadable, ``shape_error``)."""
    from privaudit.audits.one_run import auto_canaries
    from privaudit.audits.one_run_work import time_one_run_work

    requests = _requests("one_run", params, defenders)
    if not requests:
        return None
    try:
        m = params.one_run.canaries
        if m == "auto":
            if shape is None:
                raise ValueError(shape_error)
            m = auto_canaries(shape.dim, shape.n_classes)
        t = time_one_run_work(requests, int(m), seed=params.base.seed)
    except (OSError, ValueError, KeyError) as err:  # an estimate, not a check: the one-run stage refuses for itself
        return 0.0, f"its bounds not timed ({type(err).__name__}: {err})"
    return t.seconds, f"its bounds, {t.seconds:.2g} s measured ({t.timed_by})"


def _whitebox_work(params: Params, defenders: Path) -> tuple[float, str] | None:
    """The white-box stage's work besides its training runs (its estimate), timed on the recorded release runs (for a
    stage that has not run); None when the audit applies to no defender."""
    from privaudit.audits.whitebox_work import time_whitebox_work

    requests = _requests("whitebox", params, defenders)
    if not requests:
        return None
    try:
        t = time_whitebox_work(requests, defenders, params.whitebox.runs)
    except (OSError, ValueError, KeyError) as err:  # an estimate, not a check: the white-box stage refuses for itself
        return 0.0, f"its estimate not timed ({type(err).__name__}: {err})"
    return t.seconds, f"its estimate, {t.seconds:.2g} s measured ({t.timed_by})"


def _body(args: argparse.Namespace, params: Params) -> None:
    """Print what the audit will cost at the sizes the params ask; stop, naming a smaller audit, over budget."""
    from stages import _runner

    startup = _runner.STARTUP_SECONDS
    ensure_writable(args.out)
    times = read_fit_times(args.timings)
    specs = params.audited_defenders()
    digests = user_code_digests([s.model_dump(mode="json") for s in specs], Path.cwd())
    inputs = []
    for spec in specs:
        info = read_defender_info(args.defenders, spec.name)
        t = times.get(spec.name)
        key = fit_key(spec.model_dump(mode="json"), digests.get(spec.name), info.n_defender)
        batched = spec.kind in BATCHED_KINDS
        rate = single = None
        if t is not None and t.key == key:
            seconds, timed_by = t.planning_seconds()
            # the canaries' own fits ran on the pool already (their contention is in them); a probe's, alone
            pooled = t.audit_seconds is None and t.slowdown_workers > 1
            rate = FitRate(seconds, t.call_seconds if batched else 0.0, max(1, info.n_defender),
                           timed_by + (f"; {t.slowdown_by}" if pooled and t.slowdown_by else ""),
                           slowdown=t.slowdown if pooled else 1.0, slowdown_workers=t.slowdown_workers if pooled else 1)
            single = FitRate(t.seconds, 0.0, max(1, info.n_defender), "release fit") if batched else None
        claims, observable = spec.claims_epsilon(), spec.observable_training()
        inputs.append(DefenderInput(
            name=spec.name, kind=spec.kind, batched=batched, claims_epsilon=claims, observable=observable, rate=rate,
            blackbox_runs=params.blackbox.runs_per_side(batched=batched, claims_epsilon=claims, observable=observable),
            n_defender=max(1, info.n_defender), n_reserved=max(1, int(info.raw.get("n_reserved") or info.n_defender)),
            sequential_runs=claims and not batched and not observable,
            batched_on_workers=batched and t is not None and t.device == "cpu", single_rate=single,
            observing_seconds=t.observing_seconds if t is not None and t.key == key else 0.0))
    fixed = {}
    for stage, wall in read_stage_walls(args.timings.parent / "stages.json").items():
        if (sec := wall.fixed_seconds()) is not None:
            fixed[stage] = (sec, "its last run's wall minus its planned fits")
    heavy = read_heavy_startup(args.timings.parent)
    first = ((heavy[0], f"no run recorded yet: the {heavy[1]} stage's start-up (imports, loading, checks)")
             if heavy is not None else
             (startup, "no run recorded yet: the plan stage's own start-up") if startup is not None
             else (STAGE_STARTUP_S, "no run recorded yet: a guess of its start-up"))
    # OverBudgetError: one line, exit 1, nothing written
    timed_on = next((t.device for t in times.values()), None)
    work = {}
    # the one-run probe first: nothing in this process has built a claim's curve yet (cold caches, as in its stage)
    from privaudit.features.feature_set import read_feature_shape

    try:  # read once for both probes
        shape, shape_error = read_feature_shape(args.features), ""
    except (OSError, ValueError) as err:
        shape, shape_error = None, f"{type(err).__name__}: {err}"
    if "one_run" not in fixed and (bounds := _one_run_work(params, args.defenders, shape, shape_error)) is not None:
        work["one_run"] = bounds
    if "ltu" not in fixed and (scoring := _ltu_scoring(params, args.defenders, shape)) is not None:
        work["ltu"] = scoring
    if "whitebox" not in fixed and (estimate := _whitebox_work(params, args.defenders)) is not None:
        work["whitebox"] = estimate
    plan = plan_audit(inputs, sizes_of(params, timed_on), fixed=fixed, detectable=_detectable(params, args.defenders),
                      startup=first, work=work)
    for line in plan.lines():
        print(line)
    with atomic_dir(args.out) as tmp:
        write_plan_files(tmp, plan.runs_per_side())
    args.timings.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.timings.parent / "plan.json", {
        "estimated_seconds": plan.seconds, "budget_seconds": plan.budget_seconds,
        "stages": {s: {"seconds": fixed_s + plan.stage_fits(s), "fits_seconds": plan.stage_fits(s),
                       "fixed_seconds": fixed_s} for s, fixed_s, _ in plan.fixed},
        "defenders": {d.name: {"model_seconds": None if d.rate is None else d.rate.model_seconds,
                               "call_seconds": None if d.rate is None else d.rate.call_seconds,
                               "timed_by": None if d.rate is None else d.rate.timed_by,
                               "fits": d.fits, "seconds": d.seconds, "blackbox_runs": d.blackbox_runs,
                               "stages": {s.stage: {"fits": s.fits, "calls": s.calls, "workers": s.workers,
                                                    "seconds": s.seconds, "pieces": dict(s.pieces)}
                                          for s in d.stages}} for d in plan.defenders}})


if __name__ == "__main__":
    sys.exit(run_stage("plan", _args, _body))
