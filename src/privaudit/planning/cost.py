"""What an audit will cost, before it is paid, and black-box run counts sized to a wall-clock budget.

Every audit of a defender that privaudit cannot batch (sklearn kinds, ``kind: python``, PATE, …) is a
number of ordinary fits of the defender's own trainer, one after the other on a worker:

==========  =====================================================================================
stage       fits per defender
==========  =====================================================================================
ltu         ``ltu.reference_models`` (when ``lira`` or ``rmia`` is an attacker) +
            ``ltu.risk_reference_models`` + 2 × ``ltu.rounds`` (when ``retrain`` is), on
            ``ltu.n_jobs`` workers
canaries    ``game3.runs`` + ``lidp.trials`` × (2 add/remove | 1 replace-one) + 2 × black-box runs
            per side, on ``compute.n_jobs`` workers
one_run     1 (the training run with the canary rows)
whitebox    ``whitebox.runs`` (observable defenders only)
==========  =====================================================================================

The seconds per fit are the mean of the defender's fits in the last canaries stage of the same trainer
(sustained fits), else its own release fit, timed by the defenders stage (:mod:`privaudit.planning.timings`); the estimate of a stage is fits × seconds / workers, and of the audit
the sum over defenders and stages (DVC runs the stages one after the other, each fits every defender) plus
each such stage's start-up, once (:data:`STAGE_STARTUP_S`, and :data:`WORKER_STARTUP_S` for a worker pool). Batched trainers (``torch_mlp``,
``dp_sgd``: thousands of models per call) are listed with their fits but not timed: their cost is not
a multiple of one fit.

**The budget** (``compute.budget_minutes``) bounds the estimate. Where it is exceeded, the black-box
runs per side of the sequential defenders that claim an ε — the one size that dominates (640 of the
about 750 fits of a default audit of such a trainer) — shrink to the largest count on a fixed grid
(4, 5, 6 or 7 × a power of two, at least :data:`MIN_BLACKBOX_RUNS`) that fits, never above what the
params ask; what the smaller audit can still see is reported as the detectable ε of each bound
(:mod:`privaudit.stats.detectable`). The grid keeps the sized count stable under timing noise. When
even the smallest count does not fit, :func:`plan_audit` raises :class:`OverBudgetError`, a one-line
message naming the params to change, before any expensive stage has run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["MIN_BLACKBOX_RUNS", "STAGE_STARTUP_S", "WORKER_STARTUP_S", "AuditCost", "AuditSizes", "CostPlan", "DefenderCost", "DefenderInput",
           "OverBudgetError", "grid_runs", "plan_audit"]

#: seconds a stage process takes before its first fit (python, torch, sklearn and privaudit imports, DVC's
#: own bookkeeping), added once per stage with timed fits; and a local worker pool's start (each worker
#: imports the same) — measured on 2 shared cores: 3-6 s each
STAGE_STARTUP_S = 5.0
WORKER_STARTUP_S = 5.0

#: fewest black-box runs per side the budget may size an audit down to (below this the certification
#: share of 80 % leaves too few runs for any claim under ε ≈ 5 to be refuted, whatever the model)
MIN_BLACKBOX_RUNS = 32


class OverBudgetError(ValueError):
    """The estimated wall time exceeds ``compute.budget_minutes`` even at the smallest sizes."""


@dataclass(frozen=True)
class DefenderInput:
    """What the plan knows of one audited defender.

    Attributes:
        name, kind: the defender's ``name`` and ``kind``.
        batched: trained by privaudit's batched trainer (many models per call; not timed).
        claims_epsilon: it claims a DP ε (sizes its black-box runs).
        observable: its training loop is watched (white-box audit; small black-box cross-check).
        seconds_per_fit: its measured seconds per fit (``None``: not measured).
        blackbox_runs: black-box runs per side its params ask for.
        timed_by: what measured ``seconds_per_fit`` (``"release fit"`` or ``"audit fits"``:
            :meth:`privaudit.planning.timings.FitTime.planning_seconds`).
    """

    name: str
    kind: str
    batched: bool
    claims_epsilon: bool
    observable: bool
    seconds_per_fit: float | None
    blackbox_runs: int
    timed_by: str = "release fit"


@dataclass(frozen=True)
class AuditSizes:
    """Fits per defender that do not depend on the defender (read from the params by the plan stage)."""

    ltu_fits: int
    ltu_jobs: int
    game3_fits: int
    lidp_fits: int
    whitebox_runs: int
    canary_jobs: int
    budget_seconds: float | None

    def __post_init__(self) -> None:
        for key in ("ltu_fits", "game3_fits", "lidp_fits", "whitebox_runs"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")
        if self.ltu_jobs < 1 or self.canary_jobs < 1:
            raise ValueError(f"worker counts must be >= 1, got ltu {self.ltu_jobs}, canaries {self.canary_jobs}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ValueError(f"budget_seconds must be > 0 or None, got {self.budget_seconds}")


@dataclass(frozen=True)
class AuditCost:
    """One stage's fits of one defender: ``fits`` on ``workers`` processes, ``seconds`` of wall time
    (``None``: not timed)."""

    stage: str
    fits: int
    workers: int
    seconds: float | None


@dataclass(frozen=True)
class DefenderCost:
    """The plan of one defender: its stages' costs and the black-box runs per side it will run."""

    name: str
    kind: str
    seconds_per_fit: float | None
    blackbox_runs: int
    requested_runs: int
    stages: tuple[AuditCost, ...]
    timed_by: str = "release fit"

    @property
    def fits(self) -> int:
        return sum(s.fits for s in self.stages)

    @property
    def seconds(self) -> float | None:
        """Estimated wall time of this defender's fits (``None``: not timed)."""
        if self.seconds_per_fit is None:
            return None
        return sum(s.seconds or 0.0 for s in self.stages)


@dataclass(frozen=True)
class CostPlan:
    """The whole audit's plan (:func:`plan_audit`)."""

    defenders: tuple[DefenderCost, ...]
    budget_seconds: float | None
    notes: tuple[str, ...] = field(default=())
    startup_seconds: float = 0.0

    @property
    def seconds(self) -> float:
        """Estimated wall time of every timed fit, plus the start-up of the stages that make them."""
        return sum(d.seconds or 0.0 for d in self.defenders) + self.startup_seconds

    def runs_per_side(self) -> dict[str, int]:
        """Black-box runs per side by defender (what the canaries stage runs)."""
        return {d.name: d.blackbox_runs for d in self.defenders}

    def resized(self) -> tuple[DefenderCost, ...]:
        """Defenders whose black-box runs the budget shrank."""
        return tuple(d for d in self.defenders if d.blackbox_runs < d.requested_runs)

    def lines(self) -> list[str]:
        """The plan as printed by the plan stage: one line per defender, then the total."""
        out = []
        for d in self.defenders:
            parts = ", ".join(f"{s.stage} {s.fits}" + (f" on {s.workers} workers" if s.workers > 1 else "")
                              for s in d.stages if s.fits)
            if d.seconds_per_fit is None:
                cost = "batched trainer, not timed" if d.kind in _BATCHED_NOTE else "fit time not measured"
            else:
                cost = f"{d.seconds_per_fit:.3g} s per fit ({d.timed_by}), about {_duration(d.seconds or 0.0)}"
            runs = (f"; black-box runs {d.blackbox_runs} per side (asked {d.requested_runs}, sized to "
                    f"compute.budget_minutes)" if d.blackbox_runs < d.requested_runs else "")
            out.append(f"plan: {d.name} ({d.kind}): {d.fits} fits ({parts}); {cost}{runs}")
        budget = ("no budget (compute.budget_minutes: null)" if self.budget_seconds is None
                  else f"budget {_duration(self.budget_seconds)} (compute.budget_minutes)")
        out.append(f"plan: estimated {_duration(self.seconds)} of timed fits (with {self.startup_seconds:.0f} s of "
                   f"stage start-up); {budget}")
        out.extend(f"plan: {n}" for n in self.notes)
        return out


_BATCHED_NOTE = ("torch_mlp", "dp_sgd")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def grid_runs(limit: float) -> int:
    """The largest count on the grid {4, 5, 6, 7} × 2^k (k >= 3) that is <= ``limit``; 0 below 32.

    >>> [grid_runs(x) for x in (31.9, 32, 39, 47.5, 100, 320, 1000)]
    [0, 32, 32, 40, 96, 320, 896]
    """
    if not limit >= MIN_BLACKBOX_RUNS:
        return 0
    k = int(math.floor(math.log2(limit / 4)))
    best = 0
    for kk in (k - 1, k):
        for m in (4, 5, 6, 7):
            v = m * 2 ** kk
            if v <= limit:
                best = max(best, v)
    return best


def _stages(d: DefenderInput, sizes: AuditSizes, runs: int) -> tuple[AuditCost, ...]:
    s = d.seconds_per_fit

    def cost(stage: str, fits: int, workers: int) -> AuditCost:
        w = max(1, min(workers, fits))
        return AuditCost(stage, fits, w, None if s is None or d.batched else fits * s / w)

    return (cost("ltu", sizes.ltu_fits, sizes.ltu_jobs),
            cost("canaries", sizes.game3_fits + sizes.lidp_fits + 2 * runs, sizes.canary_jobs),
            cost("one_run", 1, 1),
            cost("whitebox", sizes.whitebox_runs if d.observable else 0, 1))


def _startup(costs: Sequence[tuple[AuditCost, ...]]) -> float:
    """Start-up of the stages that make timed fits: once per stage (one process fits every defender), plus a
    worker pool's where one is used."""
    total = 0.0
    for stage in ("ltu", "canaries", "one_run", "whitebox"):
        timed = [c for stages in costs for c in stages if c.stage == stage and c.fits and c.seconds is not None]
        if timed:
            total += STAGE_STARTUP_S + (WORKER_STARTUP_S if max(c.workers for c in timed) > 1 else 0.0)
    return total


def plan_audit(defenders: Sequence[DefenderInput], sizes: AuditSizes) -> CostPlan:
    """The plan of an audit: per defender and stage, the fits, the workers and the estimated seconds;
    black-box runs sized to ``sizes.budget_seconds`` (module docstring).

    Raises:
        OverBudgetError: naming ``compute.budget_minutes`` and the sizes to lower, when the timed fits
            exceed the budget even with the black-box runs at :data:`MIN_BLACKBOX_RUNS` per side.

    >>> d = DefenderInput("mine", "python", False, True, False, 2.0, 320)
    >>> sizes = AuditSizes(ltu_fits=40, ltu_jobs=1, game3_fits=1, lidp_fits=64, whitebox_runs=2, canary_jobs=2,
    ...                    budget_seconds=600.0)
    >>> plan = plan_audit([d], sizes)
    >>> plan.runs_per_side(), round(plan.seconds)
    ({'mine': 192}, 551)
    """
    sized = [d for d in defenders if d.claims_epsilon and not d.batched and d.seconds_per_fit is not None
             and d.blackbox_runs > MIN_BLACKBOX_RUNS]
    runs = {d.name: d.blackbox_runs for d in defenders}

    def total(r: dict[str, int]) -> float:
        costs = [_stages(d, sizes, r[d.name]) for d in defenders]
        return sum(c.seconds or 0.0 for stages in costs for c in stages) + _startup(costs)

    notes = []
    untimed = [d.name for d in defenders if d.seconds_per_fit is None and not d.batched]
    if untimed:
        notes.append(f"no fit time recorded for {', '.join(untimed)} (data/.timings/ is kept outside DVC: a "
                     "defenders stage restored from the DVC cache did not time its fits); not in the estimate")
    budget = sizes.budget_seconds
    if budget is not None and total(runs) > budget:
        if sized:
            # one common count for every sized defender (water-filling: one already below it keeps its own)
            fixed = total({**runs, **{d.name: 0 for d in sized}})
            slope = sum(2 * (d.seconds_per_fit or 0.0) / max(1, min(sizes.canary_jobs, 2 * d.blackbox_runs))
                        for d in sized)
            common = grid_runs((budget - fixed) / slope) if slope > 0 and budget > fixed else 0
            common = max(common, MIN_BLACKBOX_RUNS)
            runs.update({d.name: min(d.blackbox_runs, common) for d in sized})
            while total(runs) > budget and common > MIN_BLACKBOX_RUNS:
                common = grid_runs(common - 1) or MIN_BLACKBOX_RUNS
                runs.update({d.name: min(d.blackbox_runs, common) for d in sized})
        need = total(runs)
        if need > budget:
            worst = max(defenders, key=lambda d: sum(c.seconds or 0.0 for c in _stages(d, sizes, runs[d.name])))
            raise OverBudgetError(
                f"the audit's timed fits need about {_duration(need)} ({worst.name}: {worst.seconds_per_fit:.3g} s per "
                f"fit) but compute.budget_minutes is {budget / 60:g}"
                + (f" even with {MIN_BLACKBOX_RUNS} black-box runs per side" if sized else "")
                + ": raise compute.budget_minutes or compute.n_jobs, or lower lidp.trials, ltu.risk_reference_models "
                  "or ltu.reference_models, or restrict canaries.defenders")
    out = tuple(DefenderCost(d.name, d.kind, None if d.batched else d.seconds_per_fit, runs[d.name], d.blackbox_runs,
                             _stages(d, sizes, runs[d.name]), d.timed_by) for d in defenders)
    return CostPlan(out, budget, tuple(notes), _startup([d.stages for d in out]))
