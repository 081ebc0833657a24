"""What a first plan measured of an audit stage's work besides its fits (:func:`privaudit.planning.cost.plan_audit`'s
``work``): the one-run stage's bounds (:mod:`privaudit.audits.one_run_work`) and the white-box stage's estimate
(:mod:`privaudit.audits.whitebox_work`). (The LTU stage's scoring has its own, in ``planning``, which may not import
``audits``.)"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WorkTime"]


@dataclass(frozen=True)
class WorkTime:
    """Seconds of a stage's work besides its fits, timed before the stage has run, and how they were measured."""

    seconds: float
    timed_by: str
