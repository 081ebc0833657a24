"""Stage plan: before any expensive stage, what the audit will cost → ``data/plan/`` (sizes) and a printed plan.

Per defender and stage: the fits planned, the seconds per fit (the mean of the last canaries stage's fits
of the same trainer, else the release fit the defenders stage timed: ``data/.timings/fits.json``) and the estimated wall time at the configured workers; the black-box runs of
sequential claiming defenders sized to ``compute.budget_minutes`` (``privaudit.planning.cost``). Over
budget even at the smallest sizes: exit 1 with one line naming the params to change.

Outputs: ``data/plan/`` (``privaudit.planning.plan_files``). The estimate with its times goes
to ``data/.timings/plan.json`` (outside DVC: a measurement, not a result).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.config import Params
from privaudit.defenders.info_file import read_defender_info
from privaudit.defenders.specs import BATCHED_KINDS
from privaudit.planning.cost import AuditSizes, DefenderInput, plan_audit
from privaudit.planning.plan_files import write_plan_files
from privaudit.planning.timings import DEFAULT_TIMINGS, fit_key, read_fit_times
from privaudit.repro.user_code import user_code_digests
from stages._runner import run_stage

#: the attackers whose reference models are fits of the defender's own trainer
REFERENCE_ATTACKERS = ("lira", "rmia")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--timings", type=Path, default=DEFAULT_TIMINGS)
    p.add_argument("--out", type=Path, default=Path("data/plan"))


def sizes_of(params: Params) -> AuditSizes:
    """The fits per defender that the params fix (module docstring of ``privaudit.planning.cost``)."""
    lp = params.ltu
    ltu = ((lp.reference_models if set(REFERENCE_ATTACKERS) & set(lp.attackers) else 0) + lp.risk_reference_models
           + (2 * lp.rounds if "retrain" in lp.attackers else 0))
    lidp = params.lidp.trials * (1 if params.lidp.neighbourhood == "replace_one" else 2)
    budget = params.compute.budget_minutes
    return AuditSizes(ltu_fits=ltu, ltu_jobs=lp.workers(), game3_fits=params.game3.runs, lidp_fits=lidp,
                      whitebox_runs=params.whitebox.runs, canary_jobs=params.compute.workers(),
                      budget_seconds=None if budget is None else 60.0 * budget)


def _body(args: argparse.Namespace, params: Params) -> None:
    """Print what the audit will cost; size the black-box runs to the budget; stop when it cannot fit."""
    ensure_writable(args.out)
    times = read_fit_times(args.timings)
    specs = params.audited_defenders()
    digests = user_code_digests([s.model_dump(mode="json") for s in specs], Path.cwd())
    inputs = []
    for spec in specs:
        n_defender = read_defender_info(args.defenders, spec.name).n_defender
        t = times.get(spec.name)
        key = fit_key(spec.model_dump(mode="json"), digests.get(spec.name), n_defender)
        batched = spec.kind in BATCHED_KINDS
        seconds, timed_by = t.planning_seconds() if t is not None and t.key == key else (None, "")
        inputs.append(DefenderInput(
            name=spec.name, kind=spec.kind, batched=batched, claims_epsilon=spec.claims_epsilon(),
            observable=spec.observable_training(), seconds_per_fit=seconds, timed_by=timed_by,
            blackbox_runs=params.blackbox.runs_per_side(batched=batched, claims_epsilon=spec.claims_epsilon(),
                                                        observable=spec.observable_training())))
    plan = plan_audit(inputs, sizes_of(params))  # OverBudgetError: one line, exit 1, nothing written
    for line in plan.lines():
        print(line)
    with atomic_dir(args.out) as tmp:
        write_plan_files(tmp, plan)
    args.timings.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.timings.parent / "plan.json", {
        "estimated_seconds": plan.seconds, "budget_seconds": plan.budget_seconds,
        "defenders": {d.name: {"seconds_per_fit": d.seconds_per_fit, "timed_by": d.timed_by, "fits": d.fits, "seconds": d.seconds,
                               "blackbox_runs": d.blackbox_runs, "requested_runs": d.requested_runs,
                               "stages": {s.stage: {"fits": s.fits, "workers": s.workers, "seconds": s.seconds}
                                          for s in d.stages}} for d in plan.defenders}})


if __name__ == "__main__":
    sys.exit(run_stage("plan", _args, _body))
