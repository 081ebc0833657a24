"""Measure the one-run stage's work besides its training runs, for a first plan (before the stage has ever run).

The plan prices the one-run audit's training run per defender from the defenders stage's fit timings; the
stage's other work was unknown until its first run (then its recorded wall is used). Most of it is the f-DP
view's bound against the claim's own trade-off curves (:func:`privaudit.audits.one_run.bounds_from_losses`): for
a DP-SGD claim, privacy-loss distributions of the subsampled Gaussian at every θ its search visits (dp_accounting,
cached in the process, so a fresh stage pays them all): 1.4 s of the 3.5 s one-run stage of the default audit on 2
cores, whose first plan said 1.3 s (fits 0.76 s). This module runs that work for every defender the audit
applies to with the library's own code (:func:`privaudit.audits.one_run.work_besides_fits`) on synthetic canary
scores at the audit's number of canaries, and times it.

It runs in the plan stage's process before anything there builds a claim's curve (the plan's other estimates do
not), so the caches are as cold as the one-run stage's. Synthetic scores are not the trainer's: the search visits
other θ, so the time is that of a similar search, not the same one; ``benchmarks/results/scale_*`` put the plan's
estimate beside the stage's wall.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from privaudit.audits.work_time import WorkTime

if TYPE_CHECKING:
    from privaudit.audits.protocol import AuditRequest

__all__ = ["time_one_run_work"]


def time_one_run_work(requests: Sequence["AuditRequest"], canaries: int, seed: int = 0) -> WorkTime:
    """Seconds of the one-run audit's work besides training for these defenders (one request each), measured on
    synthetic scores of ``canaries`` canaries (module docstring); ``seed`` seeds the synthetic scores only."""
    from privaudit.audits.one_run import work_besides_fits

    if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 10:
        raise ValueError(f"time_one_run_work needs canaries >= 10 (one_run.canaries), got {canaries!r}")
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for request in requests:
        work_besides_fits(request, canaries, rng)
    seconds = time.perf_counter() - start
    return WorkTime(round(seconds, 9), f"bounds and detectable ε of {len(requests)} defender"
                       f"{'' if len(requests) == 1 else 's'} on {canaries} synthetic canary scores")
