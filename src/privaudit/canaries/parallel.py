"""Sequential fits of the canary experiments, in joblib worker processes when ``compute.n_jobs`` > 1."""

from __future__ import annotations

from typing import Any

from privaudit.canaries.plan import CanaryPlan

__all__ = ["parallel_fits"]


def parallel_fits(plan: CanaryPlan, jobs: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    """Run sequential fits, in joblib worker processes when ``compute.n_jobs`` > 1 (one after the other
    inside a shard worker: the shards themselves are then spread over the processes)."""
    n_jobs = plan.compute.workers()
    if n_jobs <= 1 or len(jobs) < 2 or plan.fits_in_shard_workers:
        return [fn(*args) for fn, args in jobs]
    from joblib import Parallel, delayed

    return list(Parallel(n_jobs=n_jobs)(delayed(fn)(*args) for fn, args in jobs))
