"""Canary-trials flow: the canary shards on a Dask cluster, then the usual ``dvc repro``.

For audits that outgrow one machine (thousands of LiDP trials, Pillutla et al. 2023,
Algorithm 1; many Game-3 runs, Malek et al. 2021, App. B). The flow

1. runs ``dvc repro plan`` under the pipeline lock: the inputs of every shard, the trained defenders and
   the plan, which checks ``compute.budget_minutes`` and sizes the black-box runs (``data/plan``);
2. lists the shards not yet finished (:func:`privaudit.canaries.shards.missing_shards`, which
   also treats shards of other features/split as missing);
3. computes them as Prefect tasks on prefect-dask's ``DaskTaskRunner`` — on the existing
   cluster at ``dask_address`` (``tcp://host:8786``), else at ``compute.scheduler`` from
   ``params.yaml`` when that is an address, else on a fresh ``LocalCluster`` — and saves each
   shard atomically as it comes back, on the machine running the flow (workers need no access
   to the repository's files; every shard's randomness is fixed by ``base.seed`` and its trial
   numbers, so where it ran does not change it);
4. runs ``dvc repro``: the ``canaries`` stage finds every shard finished and only assembles them;
   then reads the gate and publishes the same artifacts as the audit flow (Failed on a failed gate).

The whole flow holds the pipeline lock (``flows/_dvc.py``), so no audit run starts the
``canaries`` stage on the same shards meanwhile. ``run_shard`` is compute and is not retried;
saving a shard (I/O) is.

Run once from the repository root: ``python -m flows.canary_trials [tcp://host:8786]``
(``--help`` lists the options).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State
from prefect_dask import DaskTaskRunner

from flows._dvc import exclusive_pipeline, resolve_repo, run_dvc
from flows.audit import GateFailed, defender_rows, gate_failure_message, publish_artifacts, read_gate, read_metrics
from privaudit.canaries.shards import DEFAULT_SHARD_ROOT, Shard, missing_shards, run_shard, save_shard
from privaudit.planning.plan_files import read_sized_runs
from privaudit.progress import FitProgress
from privaudit.canaries.plan import CanaryPlan
from privaudit.config import Params, load_params
from privaudit.features.feature_set import FeatureSet, load_feature_set


@task(name="run-shard", cache_policy=NO_CACHE)
def compute_shard(plan: CanaryPlan, fs: FeatureSet, shard: Shard, device: str | None) -> dict[str, np.ndarray]:
    """One shard's raw canary statistics on a Dask worker (compute: no retries)."""
    from privaudit.features import resolve_device

    return run_shard(plan, fs, shard, device or resolve_device(plan.device))


@task(name="save-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def store_shard(root: Path, plan: CanaryPlan, shard: Shard, arrays: dict[str, np.ndarray]) -> str:
    """Write one finished shard atomically on the flow's machine (I/O: retried)."""
    return str(save_shard(root, plan, shard, arrays))


def make_task_runner(address: str | None, n_workers: int, processes: bool) -> DaskTaskRunner:
    """``DaskTaskRunner`` on the cluster at ``address``, or on a new ``LocalCluster`` (one thread per worker)."""
    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": n_workers, "threads_per_worker": 1,
                                          "processes": processes, "dashboard_address": None})


@flow(name="privaudit-canary-shards", log_prints=True)
def shards_flow(repo: str, shards: list[Shard], device: str | None = None) -> list[str]:
    """Submit every shard to the flow's task runner; save each result as it arrives.

    Parameters stay small (they are recorded by the API); params and features are read here,
    on the flow's machine, and shipped to the workers with each task.
    """
    root = Path(repo)
    params = load_params(root / "params.yaml")
    fs = load_feature_set(root / "data" / "features", root / "data" / "split")
    store = root / DEFAULT_SHARD_ROOT
    plan = CanaryPlan.of(params, root, sized_runs=read_sized_runs(root / "data" / "plan"))
    futures = [compute_shard.submit(plan, fs, shard, device) for shard in shards]
    saved = []
    with FitProgress("canary shards", sum(s.stop - s.start for s in shards), "trial", bar=False) as progress:
        for shard, future in zip(shards, futures):  # a line per shard with rate and ETA in the run's log
            saved.append(store_shard(store, plan, shard, future.result()))
            progress.advance(shard.stop - shard.start, f"{shard.defender} {shard.experiment} {shard.start}-{shard.stop}")
    return saved


def scheduler_address(dask_address: str | None, params: Params) -> str | None:
    """The Dask scheduler to use: the flow parameter, else ``compute.scheduler`` unless ``local``."""
    if dask_address and dask_address != "local":
        return dask_address
    if dask_address is None and params.compute.scheduler != "local":
        return params.compute.scheduler
    return None


@flow(name="privaudit-canary-trials", log_prints=True)
def canary_trials_flow(
    repo: str | None = None,
    dask_address: str | None = None,
    n_workers: int = 2,
    processes: bool = True,
    device: str | None = None,
    run_pipeline: bool = True,
    timeout_s: float = 24 * 3600,
) -> State:
    """Compute the missing canary shards on Dask, then ``dvc repro``; Failed when the gate fails.

    Args:
        repo: the DVC repository (default: this checkout).
        dask_address: scheduler of an existing Dask cluster (``tcp://host:8786``); ``None``:
            ``compute.scheduler`` from params.yaml; ``"local"`` or unset there: a LocalCluster.
        n_workers, processes: size and kind of that LocalCluster (ignored with an address).
        device: torch device on the workers; ``None``: ``base.device`` resolved on each worker.
        run_pipeline: run ``dvc repro`` afterwards (False: only fill the shard store).
        timeout_s: longest wait for the pipeline lock, and longest ``dvc`` command.
    """
    logger = get_run_logger()
    root = resolve_repo(repo)
    params = load_params(root / "params.yaml")  # validated before any work
    store = root / DEFAULT_SHARD_ROOT
    with exclusive_pipeline(root, timeout_s):
        # up to the plan stage: the budget is checked and the black-box runs are sized before any shard runs
        # the stages' own lines (the plan, the canaries stage's progress with its ETA) reach the run's log as they come
        log_line = lambda line: logger.info("%s", line) if line.strip() else None  # noqa: E731
        run_dvc(root, ["repro", "plan"], timeout_s, on_line=log_line)
        fs = load_feature_set(root / "data" / "features", root / "data" / "split")
        todo = missing_shards(store, CanaryPlan.of(params, root, sized_runs=read_sized_runs(root / "data" / "plan")), fs)
        address = scheduler_address(dask_address, params)
        logger.info("%d shard(s) to compute on %s", len(todo), address or f"a LocalCluster of {n_workers} worker(s)")
        saved = []
        if todo:
            runner = make_task_runner(address, n_workers, processes)
            saved = shards_flow.with_options(task_runner=runner)(str(root), todo, device)
        if not run_pipeline:
            return Completed(message=f"computed {len(saved)} shard(s); pipeline not run", data={"shards": saved})
        run_dvc(root, ["repro"], timeout_s, on_line=log_line)
        gate = read_gate(root)
        metrics = read_metrics(root)
    rows = defender_rows(gate, metrics)
    publish_artifacts(gate, rows, root / "reports" / "audit.html")
    result: dict[str, Any] = {"shards": saved, "passed": gate.passed, "reasons": list(gate.reasons)}
    if not gate.passed:
        message = gate_failure_message(gate)
        return Failed(message=message, data=GateFailed(message, result))
    return Completed(message=f"computed {len(saved)} shard(s); release gate passed", data=result)


def main(argv: list[str] | None = None) -> int:
    """``python -m flows.canary_trials [DASK_ADDRESS] [--repo R] [--workers N] ...``: one run, exit 1 on Failed."""
    summary = (canary_trials_flow.description or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m flows.canary_trials", description=summary)
    parser.add_argument("dask_address", nargs="?", default=None,
                        help="scheduler of an existing Dask cluster (tcp://host:8786); 'local' for a new "
                             "LocalCluster; default: compute.scheduler from params.yaml")
    parser.add_argument("--repo", default=None, help="the DVC repository (default: this checkout)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default: %(default)s)")
    parser.add_argument("--threads", dest="processes", action="store_false",
                        help="LocalCluster workers as threads of this process instead of processes")
    parser.add_argument("--device", default=None, help="torch device on the workers (default: base.device)")
    parser.add_argument("--no-pipeline", dest="run_pipeline", action="store_false",
                        help="only fill the shard store; do not run dvc repro afterwards")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    state = canary_trials_flow(repo=args.repo, dask_address=args.dask_address, n_workers=args.workers,
                               processes=args.processes, device=args.device, run_pipeline=args.run_pipeline,
                               return_state=True)
    print(state.message)
    return 0 if state.is_completed() else 1


if __name__ == "__main__":
    sys.exit(main())
