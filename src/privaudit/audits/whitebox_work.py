"""Measure the white-box stage's work besides its training runs, for a first plan (before the stage has ever run).

The plan prices the white-box audit's runs from the defenders stage's watched release fit; the stage's other work
was priced at a stage's start-up until its first run (then its recorded wall is used). Most of that other work is
the estimate itself (:func:`privaudit.audits.whitebox.pooled_estimate`): opacus's accountant composed over the
pooled runs' observed noise multipliers, 1.7 s of the default audit's white-box stage on 2 cores. The 10k × 128
benchmark of session 57 (``benchmarks/results/scale_10000x128_cpu_s57.*``) had the stage planned at 3.7 s and
taken 5.1 s (0.72). This module runs that estimate on the release run the defenders stage recorded
(``release_watch.json``: the same recipe, steps, sampling and accountant as the audit runs), pooled as often as the
stage pools runs (the audit runs and the release run), at the δ, level and accountant the stage uses
(:func:`privaudit.audits.whitebox.estimate_settings`), and times it. The accountant keeps no cache between calls,
so the plan stage's process times what a fresh stage pays.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from privaudit.audits.work_time import WorkTime

if TYPE_CHECKING:
    from privaudit.audits.protocol import AuditRequest

__all__ = ["time_whitebox_work"]


def time_whitebox_work(requests: Sequence["AuditRequest"], defenders_dir: Path, runs: int) -> WorkTime:
    """Seconds of the white-box estimate for these defenders (one request each), each on its recorded release run
    pooled ``runs`` + 1 times (module docstring). A defender whose release run was not observed is left out (its
    audit then refuses or pools the audit runs alone; the plan says what it timed).

    Raises:
        FileNotFoundError / ValueError: a defender's ``release_watch.json`` or ``info.json`` is missing or unusable
            (as the white-box stage would refuse it).
    """
    from privaudit.audits.whitebox import estimate_settings, pooled_estimate
    from privaudit.defenders.info_file import read_defender_info
    from privaudit.defenders.release_watch import read_release_watch

    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"time_whitebox_work needs runs >= 1 (whitebox.runs), got {runs!r}")
    timed, seconds = [], 0.0
    for request in requests:
        release = read_release_watch(Path(defenders_dir) / request.name)
        if release.observations is None:
            continue
        n = read_defender_info(Path(defenders_dir), request.name).n_defender
        delta, accountant = estimate_settings(request)
        start = time.perf_counter()
        pooled_estimate([release.observations] * (runs + 1), dataset_size=n, delta=delta, level=request.level,
                        accountant=accountant, canary_scale=release.canary_scale)
        seconds += time.perf_counter() - start
        timed.append(request.name)
    return WorkTime(round(seconds, 9), f"the estimate of {len(timed)} defender{'' if len(timed) == 1 else 's'}"
                            f" on {runs + 1} copies of its recorded release run" if timed
                            else "no release run observed: nothing to time")
