"""Stage canaries: Game-3 runs and LiDP trials per audited defender → raw per-canary statistics.

Trials run in shards (privaudit.canaries.shards): missing shards are computed locally or on the
Dask cluster at ``compute.scheduler`` and saved in ``data/.shards/canaries`` as they finish, so
a killed stage resumes; then all shards are assembled into ``data/canaries/<defender>/``.
"""

from __future__ import annotations

import argparse
import sys
from operator import attrgetter
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.canaries.assembly import canary_meta, summary_line, write_defender_outputs
from privaudit.canaries.plan import CanaryPlan
from privaudit.canaries.runner import check_canary_setup
from privaudit.canaries.shards import (DEFAULT_SHARD_ROOT, Shard, inputs_fingerprint, missing_shards, plan_shards,
                                       prune_shards, run_missing_shards, shards_at_once, start_lanes)
from privaudit.canaries.sizes import game3_canaries
from privaudit.config import Params
from privaudit.planning.plan_files import read_sized_runs
from privaudit.progress import FitProgress
from privaudit.planning.timings import DEFAULT_TIMINGS, planned_piece_seconds, record_shard_times
from privaudit.repro.determinism import configure_determinism
from privaudit.features import resolve_device
from privaudit.features.feature_set import load_feature_set
from stages._runner import progress_enabled, run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/canaries"))
    p.add_argument("--shards", type=Path, default=DEFAULT_SHARD_ROOT, help="store of finished shards")
    p.add_argument("--plan", type=Path, default=None,
                   help="the plan stage's outputs (data/plan): black-box runs sized to compute.budget_minutes")
    p.add_argument("--timings", type=Path, default=DEFAULT_TIMINGS,
                   help="where the shards' seconds per fit are recorded for the next plan (outside DVC)")


def _body(args: argparse.Namespace, params: Params) -> None:
    """Train the canary-augmented models of Game 3 and of the LiDP trials (resumable shards)."""
    ensure_writable(args.out)
    device = resolve_device(params.base.device)
    configure_determinism(device)  # local shards train in this process (Dask workers set it in theirs)
    fs, plan = load_feature_set(args.features, args.split), CanaryPlan.of(
        params, sized_runs=read_sized_runs(args.plan) if args.plan is not None else None)
    check_canary_setup(plan, fs)
    todo, shards = missing_shards(args.shards, plan, fs), plan_shards(plan)
    where = "locally" if params.compute.scheduler == "local" else "on " + params.compute.scheduler
    workers = params.compute.workers()
    jobs = f", {workers} worker processes" if where == "locally" and workers > 1 and len(todo) > 1 else ""
    print(f"canaries: {len(shards) - len(todo)} of {len(shards)} shards already finished; running {len(todo)} ({where}{jobs})")
    took: dict[str, list[tuple[int, float]]] = {}  # per defender: trials and seconds of each shard (fit times)

    # the ETA weighs each shard by its planned seconds (a measurement outside DVC; None: every trial the same)
    planned = planned_piece_seconds(args.timings.parent / "plan.json",
                                    [(s.defender, s.experiment, s.stop - s.start) for s in todo], plan.trials)
    planned_of = dict(zip(todo, planned)) if planned is not None else None

    # side by side: each shard's own seconds give the rate (None, on a Dask cluster of unknown size: the wall clock)
    at_once = shards_at_once(plan, todo, device)
    # the pools the shards run in, each in the order they start, with their planned seconds: the ETA is when the
    # last pool finishes (None: unknown, on a Dask cluster)
    pools = start_lanes(plan, todo, device, planned_of)
    lanes = None if pools is None or planned_of is None else [(w, [(s, planned_of[s]) for s in order])
                                                              for w, order in pools]

    def done(s: Shard, seconds: float) -> None:
        took.setdefault(s.defender, []).append((s.stop - s.start, seconds))
        bar.advance(s.stop - s.start, f"{s.defender} {s.experiment} {s.start}-{s.stop}",
                    planned=None if planned_of is None else planned_of[s],
                    seconds=None if at_once is None else seconds, piece=s if lanes is not None else None)

    with FitProgress("canaries", sum(s.stop - s.start for s in todo), "trial", bar=progress_enabled(),
                     planned_seconds=None if planned is None else sum(planned),
                     workers=at_once or 1, lanes=lanes, group=None if lanes is None else attrgetter("defender")) as bar:
        run_missing_shards(args.shards, plan, fs, todo, device, done, planned_of)
    fp, n_game3 = inputs_fingerprint(fs), game3_canaries(plan, int(fs.is_defender.sum()))
    meta = canary_meta(plan, fs.n_classes, n_game3, fp)
    with atomic_dir(args.out) as tmp:
        for name in (spec.name for spec in plan.defenders):
            write_defender_outputs(tmp, args.shards, plan, shards, name, meta, fp, fs)
            print(summary_line(plan, name, fs.n_classes, n_game3))
    # measured, not a result: beside the DVC outputs, for the next plan (privaudit.planning.timings)
    record_shard_times([spec.model_dump(mode="json") for spec in plan.defenders], took,
                       int(fs.is_defender.sum()), Path.cwd(), args.timings)
    if removed := (prune_shards(args.shards, plan) if params.compute.prune_shards else []):
        print(f"canaries: pruned {len(removed)} shard director{'y' if len(removed) == 1 else 'ies'} of other "
              f"params/code under {args.shards} (compute.prune_shards: false keeps them)")


if __name__ == "__main__":
    sys.exit(run_stage("canaries", _args, _body, torch_threads=1))
