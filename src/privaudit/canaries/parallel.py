"""Sequential fits of the canary experiments, in worker processes (:mod:`privaudit.repro.worker_pool`) when
``compute.n_jobs`` > 1."""

from __future__ import annotations

from typing import Any

from privaudit.canaries.plan import CanaryPlan

__all__ = ["parallel_fits"]


def parallel_fits(plan: CanaryPlan, jobs: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    """Run sequential fits, in worker processes when ``compute.n_jobs`` > 1 (one after the other
    inside a shard worker: the shards themselves are then spread over the processes)."""
    n_jobs = plan.compute.workers()
    if n_jobs <= 1 or len(jobs) < 2 or plan.fits_in_shard_workers:
        return [fn(*args) for fn, args in jobs]
    from privaudit.repro.worker_pool import map_in_processes

    return list(map_in_processes(_apply, jobs, n_jobs))


def _apply(fn: Any, args: tuple[Any, ...]) -> Any:
    """``fn(*args)`` in a worker (:func:`privaudit.repro.worker_pool.map_in_processes` calls one function per item)."""
    return fn(*args)
