"""Where a defender's sequential fits run: in the stage's own process or on a pool of worker processes.

One rule (:func:`workers_pay`) for the LTU stage's reference models
(:func:`privaudit.attacks.mia_reference.train_subset_confidences`) and for the plan that predicts their cost
(:mod:`privaudit.planning.cost`). Standard library only: the plan stage imports it.
"""

from __future__ import annotations

from privaudit.repro.worker_pool import LOKY_STARTUP_S

__all__ = ["WORKER_STARTUP_S", "workers_pay"]

#: a local worker pool's start where its workers are fresh interpreters (loky's: each imports the trainer's
#: libraries), when no stage wall was recorded; a forked pool's is
#: :data:`privaudit.repro.worker_pool.FORK_STARTUP_S`
WORKER_STARTUP_S = LOKY_STARTUP_S


def workers_pay(fit_seconds: float, fits: int, jobs: int, startup_s: float = WORKER_STARTUP_S) -> bool:
    """Whether ``fits`` more sequential fits of ``fit_seconds`` each end sooner on ``jobs`` worker processes than in
    the stage's own process: what the workers save, ``fits * fit_seconds * (1 - 1/w)`` with ``w = min(jobs, fits)``,
    exceeds the pool's start-up. The numbers are the same either way (every fit runs single-threaded from its own
    seed); only the wall time differs."""
    w = min(jobs, fits)
    return w > 1 and fits * fit_seconds * (1.0 - 1.0 / w) > startup_s
