"""What an audit will cost, before it is paid; the budget is a guard, never a resizer.

**The sizes** of an audit (black-box runs per side, LiDP trials, reference models, …) are a function of the
params, the code and the data only: the plan stage writes them from the params (``data/plan/sizes.json``,
:mod:`privaudit.planning.plan_files`), so the same inputs give the same sizes whatever this machine's load or
timing history, and an ``ltu.*`` experiment never reruns the canary audit.

**The estimate.** Every audit of a defender is a number of *calls* of its trainer, each fitting some models
on some rows. Per defender the defenders stage measures (:mod:`privaudit.planning.fit_probe`) what one call
costs: a sequential trainer (sklearn kinds, ``kind: python``, PATE) ``model_seconds`` per fit (its release fit
is the warm-up — a user trainer that computes σ with an accountant on its first call took 6.2 s there against
0.017 s per later fit — then the median of three fits); a batched trainer (``torch_mlp``, ``dp_sgd``)
``call_seconds + k × model_seconds`` for a call of k models (after a warm-up call, the medians of three calls
of 2 and of 32 models: intercept and per-model slope). A call on r rows is scaled by r / (rows measured).
The calls of each stage:

==========  ==========================================================================================
stage       calls per defender (models per call)
==========  ==========================================================================================
ltu         ``ltu.reference_models`` on ``ltu.reference_fraction`` of the Reserved set (when ``lira`` or
            ``rmia`` attack), ``ltu.risk_reference_models`` on Defender-size sets, 2 × ``ltu.rounds``
            mocks (``retrain``): batched in chunks of 256, else one fit each (on ``ltu.n_jobs`` workers
            when a fit takes >= 0.5 s, as :mod:`privaudit.attacks.mia_reference` does)
canaries    ``game3.runs`` and ``lidp.trials`` (× 2 models for add/remove) in blocks of
            ``compute.block_trials``; 2 × black-box runs per side in blocks of ``blackbox.block``
            (batched), else one fit each on ``compute.n_jobs`` workers
one_run     1 (the training run with the canary rows), by the defender's own trainer: a batched defender's
            costs its release fit (``DefenderInput.single_rate``), not a model of a batched call, less what the
            release fit's white-box recording cost (``DefenderInput.observing_seconds``: this run is not watched)
whitebox    ``whitebox.runs`` (observable defenders only), priced as ``one_run``'s plus the recording, on
            ``compute.n_jobs`` workers on the CPU (⌈runs / workers⌉ fits each, at the defender's measured
            contention), one after the other on CUDA
==========  ==========================================================================================

A stage also has a fixed cost that is not fits (start-up and imports, loading, the attackers' rounds,
validation, writing): the wall of its last run minus the fits planned for it then
(:func:`privaudit.planning.timings.read_stage_walls`); before any run, the defenders stage's measured start-up
to its first fit (:func:`privaudit.planning.timings.read_heavy_startup`; a lower bound), else the plan stage's
own. The estimate of a stage is its fixed cost plus its calls; of the audit, the sum over stages (DVC runs them
one after the other).

**The budget** (``compute.budget_minutes``) is a guard: over it, :func:`plan_audit` raises
:class:`OverBudgetError` before any expensive stage runs, one line naming the estimate, the budget, the
largest ``blackbox.sequential_runs`` on a fixed grid (4, 5, 6 or 7 × a power of two, at least
:data:`MIN_BLACKBOX_RUNS`) that would fit, the ε that smaller audit could still detect
(:mod:`privaudit.stats.detectable`) and the command to run. The user chooses; the plan never shrinks an
audit behind their back.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from privaudit.defenders.fit_workers import WORKER_STARTUP_S, workers_pay

__all__ = ["MAX_BATCHED_MODELS", "MIN_BLACKBOX_RUNS", "STAGE_STARTUP_S", "STAGES",
           "WORKER_STARTUP_S", "workers_pay", "AuditCost", "AuditSizes", "CostPlan", "DefenderCost", "DefenderInput", "FitRate",
           "OverBudgetError", "grid_runs", "plan_audit"]

#: seconds a stage process takes before its first fit when nothing better was measured (benchmarks use it)
STAGE_STARTUP_S = 5.0
#: the stages whose work the plan estimates, in the order DVC runs them
STAGES = ("ltu", "canaries", "one_run", "whitebox")
#: models per call of the batched trainer in the LTU stage (:data:`privaudit.attacks.batched_mocks.MAX_MODELS`)
MAX_BATCHED_MODELS = 256

#: fewest black-box runs per side the over-budget message proposes (below this the certification share of
#: 80 % leaves too few runs for any claim under ε ≈ 5 to be refuted, whatever the model)
MIN_BLACKBOX_RUNS = 32


class OverBudgetError(ValueError):
    """The estimated wall time exceeds ``compute.budget_minutes``."""


@dataclass(frozen=True)
class FitRate:
    """What a call of a defender's trainer costs here: ``call_seconds + k × model_seconds × r / n_rows`` for k
    models on r rows (``timed_by``: how it was measured); a call runs ``slowdown`` times slower while
    ``slowdown_workers`` workers run at once (:func:`privaudit.planning.fit_probe.concurrent_slowdown`)."""

    model_seconds: float
    call_seconds: float = 0.0
    n_rows: int = 1
    timed_by: str = "fits"
    slowdown: float = 1.0
    slowdown_workers: int = 1

    def __post_init__(self) -> None:
        if not (self.model_seconds >= 0 and self.call_seconds >= 0 and self.n_rows >= 1):
            raise ValueError(f"a fit rate needs seconds >= 0 and n_rows >= 1, got {self}")
        if not (self.slowdown >= 1 and self.slowdown_workers >= 1):
            raise ValueError(f"a fit rate's slowdown must be >= 1 on >= 1 workers, got {self}")

    def seconds(self, calls: int, models: int, rows: int) -> float:
        return calls * self.call_seconds + models * self.model_seconds * rows / self.n_rows

    def contention(self, workers: int) -> float:
        """How much slower each call runs on ``workers`` workers at once: 1 on one, the measured slowdown on as
        many as were measured or more, linear in ``workers - 1`` between.

        >>> r = FitRate(1.0, slowdown=1.2, slowdown_workers=3)
        >>> r.contention(1), r.contention(2), r.contention(3), r.contention(8)
        (1.0, 1.1, 1.2, 1.2)
        """
        if workers <= 1 or self.slowdown_workers <= 1:
            return 1.0
        share = min(1.0, (workers - 1) / (self.slowdown_workers - 1))
        return 1.0 + (self.slowdown - 1.0) * share


@dataclass(frozen=True)
class DefenderInput:
    """What the plan knows of one audited defender.

    Attributes:
        name, kind: the defender's ``name`` and ``kind``.
        batched: trained by privaudit's batched trainer (many models per call).
        claims_epsilon: it claims a DP ε. observable: its training loop is watched (white-box audit).
        rate: its measured cost per call (``None``: not measured; left out of the estimate, named).
        blackbox_runs: black-box runs per side (from the params).
        n_defender, n_reserved: Defender and Reserved set sizes.
        sequential_runs: its black-box runs come from ``blackbox.sequential_runs`` (what the budget message
            proposes to lower).
        batched_on_workers: a batched defender timed on a CPU: the canaries stage then runs its shards on the
            ``compute.n_jobs`` workers like any other (on CUDA they train in the stage's own process,
            ``privaudit.canaries.shards.run_missing_shards``).
        single_rate: a batched defender's one fit by its own trainer (its release fit, one-off costs included):
            the one-run and white-box audits train single models with that trainer, not with the batched one
            (at 10k × 128 an opacus DP-SGD fit took 7.1 s against 0.36 s for a model in a batched call);
            ``None``: ``rate``.
        observing_seconds: what the white-box recording of an observable defender's release fit cost
            (:attr:`privaudit.hooks.Recording.observing_seconds`): the white-box audit's runs are watched, the
            one-run audit's run is not (at 10k × 128 an opacus DP-SGD fit took 5.9-6.7 s watched, 3.5-3.8 s not),
            so the watched release fit prices the one-run run without it, and a sequential trainer's unwatched
            probe fits price the white-box runs with it.
    """

    name: str
    kind: str
    batched: bool
    claims_epsilon: bool
    observable: bool
    rate: FitRate | None
    blackbox_runs: int
    n_defender: int = 1
    n_reserved: int = 1
    sequential_runs: bool = False
    batched_on_workers: bool = False
    single_rate: FitRate | None = None
    observing_seconds: float = 0.0


@dataclass(frozen=True)
class AuditSizes:
    """The sizes the params fix (the plan stage reads them: ``stages.plan.sizes_of``)."""

    reference_models: int = 0
    reference_fraction: float = 0.5
    risk_reference_models: int = 0
    retrain_mocks: int = 0
    ltu_jobs: int = 1
    game3_runs: int = 1
    lidp_trials: int = 0
    lidp_models_per_trial: int = 2
    lidp_canaries: int = 0
    block_trials: int = 16
    blackbox_block: int = 1000
    canary_jobs: int = 1
    whitebox_runs: int = 0
    #: workers the white-box runs spread over (``compute.n_jobs`` on the CPU; 1 on CUDA, where they stay in the stage)
    whitebox_jobs: int = 1
    budget_seconds: float | None = None
    #: a worker pool's start-up where the audit runs (:func:`privaudit.repro.worker_pool.pool_startup_seconds`)
    pool_startup_s: float = WORKER_STARTUP_S

    def __post_init__(self) -> None:
        for key in ("reference_models", "risk_reference_models", "retrain_mocks", "game3_runs", "lidp_trials",
                    "lidp_canaries", "whitebox_runs"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")
        if min(self.ltu_jobs, self.canary_jobs, self.whitebox_jobs, self.block_trials, self.blackbox_block) < 1:
            raise ValueError(f"worker counts and blocks must be >= 1, got {self}")
        if not self.pool_startup_s >= 0:
            raise ValueError(f"pool_startup_s must be >= 0, got {self.pool_startup_s}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ValueError(f"budget_seconds must be > 0 or None, got {self.budget_seconds}")


@dataclass(frozen=True)
class AuditCost:
    """One stage's work for one defender: ``calls`` of the trainer fitting ``fits`` models on ``workers``
    processes, ``seconds`` of wall time (``None``: not measured); ``pieces``: seconds per experiment
    (canaries: game3 / lidp / blackbox, for the progress line's ETA)."""

    stage: str
    fits: int
    workers: int
    seconds: float | None
    calls: int = 0
    pieces: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class DefenderCost:
    """The plan of one defender: its stages' costs."""

    name: str
    kind: str
    rate: FitRate | None
    blackbox_runs: int
    stages: tuple[AuditCost, ...]

    @property
    def fits(self) -> int:
        return sum(s.fits for s in self.stages)

    @property
    def seconds(self) -> float | None:
        """Estimated wall time of this defender's fits (``None``: not measured)."""
        return None if self.rate is None else sum(s.seconds or 0.0 for s in self.stages)

    def stage(self, name: str) -> AuditCost:
        return next(s for s in self.stages if s.stage == name)


@dataclass(frozen=True)
class CostPlan:
    """The whole audit's plan (:func:`plan_audit`): per defender its fits; per stage the fixed cost."""

    defenders: tuple[DefenderCost, ...]
    budget_seconds: float | None
    fixed: tuple[tuple[str, float, str], ...] = ()  # (stage, seconds, where from)
    notes: tuple[str, ...] = field(default=())

    def stage_fits(self, stage: str) -> float:
        return sum(d.stage(stage).seconds or 0.0 for d in self.defenders)

    def stage_seconds(self) -> dict[str, float]:
        """Estimated wall time per stage that runs: fixed cost + the defenders' fits."""
        return {s: sec + self.stage_fits(s) for s, sec, _ in self.fixed}

    @property
    def seconds(self) -> float:
        """Estimated wall time of the audit stages (:data:`STAGES`)."""
        return sum(self.stage_seconds().values())

    @property
    def startup_seconds(self) -> float:
        return sum(sec for _, sec, _ in self.fixed)

    def runs_per_side(self) -> dict[str, int]:
        """Black-box runs per side by defender (what the canaries stage runs)."""
        return {d.name: d.blackbox_runs for d in self.defenders}

    def lines(self) -> list[str]:
        """The plan as printed by the plan stage: one line per defender, one per stage, then the total."""
        out = []
        for d in self.defenders:
            parts = ", ".join(f"{s.stage} {s.fits}" + (f" on {s.workers} workers" if s.workers > 1 else "")
                              for s in d.stages if s.fits)
            if d.rate is None:
                cost = "fit time not measured"
            elif d.rate.call_seconds:
                cost = (f"{d.rate.call_seconds:.3g} s per call + {d.rate.model_seconds:.3g} s per model "
                        f"({d.rate.timed_by}), about {_duration(d.seconds or 0.0)}")
            else:
                cost = f"{d.rate.model_seconds:.3g} s per fit ({d.rate.timed_by}), about {_duration(d.seconds or 0.0)}"
            out.append(f"plan: {d.name} ({d.kind}): {d.fits} fits ({parts}); {cost}; black-box runs "
                       f"{d.blackbox_runs} per side")
        for stage, fixed, source in self.fixed:
            out.append(f"plan: stage {stage}: about {_duration(fixed + self.stage_fits(stage))} "
                       f"(fits {_duration(self.stage_fits(stage))} + {_duration(fixed)} fixed: {source})")
        budget = ("no budget (compute.budget_minutes: null)" if self.budget_seconds is None
                  else f"budget {_duration(self.budget_seconds)} (compute.budget_minutes)")
        out.append(f"plan: estimated {_duration(self.seconds)} for the audit stages ({', '.join(s for s, _, _ in self.fixed)}); "
                   f"{budget}")
        out.extend(f"plan: {n}" for n in self.notes)
        return out


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


def _chunks(models: int, per_call: int) -> int:
    return -(-models // per_call) if models else 0


def _stages(d: DefenderInput, sizes: AuditSizes, runs: int) -> tuple[AuditCost, ...]:
    r, n = d.rate, d.n_defender
    ref_rows = max(2, int(round(sizes.reference_fraction * d.n_reserved)))

    def work(stage: str, pieces: Sequence[tuple[str, int, int, int]], workers: int,
             batched_on_workers: bool = False,
             piece_workers: Callable[[str, int, int], int] | None = None, rate: FitRate | None = r) -> AuditCost:
        """pieces: (name, calls, models, rows per model); piece_workers(name, models, rows): a piece's own worker
        count where the stage decides per piece (the LTU stage's sequential fits); rate: the fits' cost."""
        fits = sum(m for _, _, m, _ in pieces)
        if d.batched:  # one call is one shard's work: as many workers as calls at most
            w = max(1, min(workers, sum(c for _, c, _, _ in pieces))) if batched_on_workers else 1
        else:
            w = max(1, min(workers, fits))
        ws = {p: (piece_workers(p, m, rows) if piece_workers is not None and not d.batched else w)
              for p, _, m, rows in pieces}
        timed = None if rate is None else tuple((p, rate.seconds(c, m, rows) * rate.contention(ws[p]) / ws[p])
                                                for p, c, m, rows in pieces)
        w = max(ws.values(), default=w)
        return AuditCost(stage, fits, w, None if timed is None else sum(s for _, s in timed),
                         sum(c for _, c, _, _ in pieces), timed or ())

    def calls(models: int, per_call: int) -> int:
        return _chunks(models, per_call) if d.batched else models

    ltu = [("reference", calls(sizes.reference_models, MAX_BATCHED_MODELS), sizes.reference_models, ref_rows),
           ("risk", calls(sizes.risk_reference_models, MAX_BATCHED_MODELS), sizes.risk_reference_models, n),
           ("retrain", calls(sizes.retrain_mocks, MAX_BATCHED_MODELS), sizes.retrain_mocks, n)]

    def ltu_workers(piece: str, models: int, rows: int) -> int:
        """The retrain mocks always run on the workers; reference models when :func:`workers_pay` says so for the
        fits after the first (timed in the stage, as here)."""
        if piece == "retrain":
            return max(1, min(sizes.ltu_jobs, models))
        pays = r is not None and models > 1 and workers_pay(r.seconds(1, 1, rows), models - 1, sizes.ltu_jobs,
                                                         sizes.pool_startup_s)
        return min(sizes.ltu_jobs, models - 1) if pays else 1
    lidp_models = sizes.lidp_trials * sizes.lidp_models_per_trial
    bt, bb = sizes.block_trials, sizes.blackbox_block
    canaries = [("game3", calls(sizes.game3_runs, bt), sizes.game3_runs, n),
                ("lidp", _chunks(sizes.lidp_trials, bt) if d.batched else lidp_models, lidp_models,
                 n + sizes.lidp_canaries),
                ("blackbox", calls(2 * runs, bb), 2 * runs, n + 1)]
    white = sizes.whitebox_runs if d.observable else 0
    # one fit by the defender's own trainer: a batched defender's release fit (watched when it is observable),
    # a sequential one's probe fits (never watched); the one-run run is unwatched, the white-box runs watched
    watched_release = d.batched and d.single_rate is not None
    single = d.single_rate if watched_release else r
    obs = d.observing_seconds if d.observable else 0.0
    unwatched = (dataclasses.replace(single, model_seconds=max(0.0, single.model_seconds - obs))
                 if single is not None and watched_release and obs else single)
    watched = (dataclasses.replace(single, model_seconds=single.model_seconds + obs)
               if single is not None and not watched_release and obs else single)
    return (work("ltu", ltu, 1, piece_workers=ltu_workers),
            work("canaries", canaries, sizes.canary_jobs, d.batched_on_workers),
            work("one_run", [("one_run", 1, 1, n)], 1, rate=unwatched),
            _whitebox(white, n, sizes.whitebox_jobs, watched, r))


def _whitebox(runs: int, rows: int, jobs: int, watched: FitRate | None, probe: FitRate | None) -> AuditCost:
    """The white-box audit's ``runs`` watched fits on ``min(jobs, runs)`` workers (``compute.n_jobs``,
    :func:`privaudit.audits.whitebox.whitebox_audit`): ⌈runs / workers⌉ fits one after the other, each slowed by the
    contention the defender's own probe measured on that many workers (``probe``; a release fit carries none)."""
    w = max(1, min(jobs, runs))
    if watched is None:
        return AuditCost("whitebox", runs, w, None, runs)
    if probe is not None and w > 1:
        watched = dataclasses.replace(watched, slowdown=probe.slowdown, slowdown_workers=probe.slowdown_workers)
    seconds = -(-runs // w) * watched.seconds(1, 1, rows) * watched.contention(w) if runs else 0.0
    return AuditCost("whitebox", runs, w, seconds, runs, (("whitebox", seconds),))


def plan_audit(defenders: Sequence[DefenderInput], sizes: AuditSizes, *,
               fixed: Mapping[str, tuple[float, str]] | None = None,
               detectable: Callable[[str, int], float | None] | None = None,
               startup: tuple[float, str] = (STAGE_STARTUP_S, "not measured yet: a guess of its start-up"),
               work: Mapping[str, tuple[float, str]] | None = None,
               ) -> CostPlan:
    """The plan of an audit at the sizes the params ask: per defender and stage the fits, workers and seconds,
    per stage the fixed cost (``fixed``: stage → (seconds, where from), its last run's; a stage not in it costs
    ``startup`` (seconds, where from: default :data:`STAGE_STARTUP_S`), plus ``sizes.pool_startup_s`` when it
    starts a worker pool, plus ``work[stage]`` (seconds, where from): its work besides fits, measured before
    the stage has run, e.g. the LTU stage's scoring, :mod:`privaudit.planning.ltu_scoring`).

    Raises:
        OverBudgetError: one line (module docstring) when the estimate exceeds ``sizes.budget_seconds``;
            ``detectable(defender, runs per side)`` gives the ε a smaller black-box audit could detect.

    >>> d = DefenderInput("mine", "python", False, True, False, FitRate(2.0, n_rows=900), 320, 900, 900, True)
    >>> sizes = AuditSizes(reference_models=40, game3_runs=1, lidp_trials=32, canary_jobs=2, budget_seconds=1200.0)
    >>> plan = plan_audit([d], sizes, fixed={s: (5.0, "measured") for s in ("ltu", "canaries", "one_run")})
    >>> plan.runs_per_side(), round(plan.seconds)
    ({'mine': 320}, 763)
    """
    fixed = dict(fixed or {})
    costs = [DefenderCost(d.name, d.kind, d.rate, d.blackbox_runs, _stages(d, sizes, d.blackbox_runs))
             for d in defenders]

    def stage_fixed(costs: Sequence[DefenderCost]) -> tuple[tuple[str, float, str], ...]:
        out = []
        for stage in STAGES:
            here = [c.stage(stage) for c in costs if c.stage(stage).fits]
            if not here:
                continue
            if stage in fixed:
                out.append((stage, *fixed[stage]))
            else:
                pool = max(c.workers for c in here) > 1
                extra, why = (work or {}).get(stage, (0.0, ""))
                out.append((stage, startup[0] + (sizes.pool_startup_s if pool else 0.0) + extra,
                            startup[1] + (f" + a worker pool's start ({sizes.pool_startup_s:g} s)" if pool else "")
                            + (f" + {why}" if why else "")))
        return tuple(out)

    notes = []
    untimed = [d.name for d in defenders if d.rate is None]
    if untimed:
        notes.append(f"no fit time recorded for {', '.join(untimed)} (data/.timings/ is kept outside DVC: a "
                     "defenders stage restored from the DVC cache did not time its fits); not in the estimate")
    plan = CostPlan(tuple(costs), sizes.budget_seconds, stage_fixed(costs), tuple(notes))
    budget = sizes.budget_seconds
    if budget is not None and plan.seconds > budget:
        raise OverBudgetError(_over_budget(plan, list(defenders), sizes, budget, stage_fixed, detectable))
    return plan


def _over_budget(plan: CostPlan, defenders: list[DefenderInput], sizes: AuditSizes, budget: float,
                 stage_fixed: Callable[[Sequence[DefenderCost]], tuple[tuple[str, float, str], ...]],
                 detectable: Callable[[str, int], float | None] | None) -> str:
    """The one-line message: estimate, budget, the largest ``blackbox.sequential_runs`` that fits (with its
    detectable ε) and the command."""
    def at(runs: int) -> CostPlan:
        costs = [DefenderCost(d.name, d.kind, d.rate, min(d.blackbox_runs, runs) if d.sequential_runs else d.blackbox_runs,
                              _stages(d, sizes, min(d.blackbox_runs, runs) if d.sequential_runs else d.blackbox_runs))
                 for d in defenders]
        return CostPlan(tuple(costs), budget, stage_fixed(costs))

    slowest = max(plan.stage_seconds().items(), key=lambda kv: kv[1])
    head = (f"the audit needs about {_duration(plan.seconds)} (longest stage {slowest[0]}: about "
            f"{_duration(slowest[1])}) but compute.budget_minutes is {budget / 60:g}")
    raise_to = f"compute.budget_minutes={math.ceil(plan.seconds / 60 * 1.1)}"
    sequential = [d for d in defenders if d.sequential_runs and d.rate is not None and d.blackbox_runs > MIN_BLACKBOX_RUNS]
    if sequential:
        asked = max(d.blackbox_runs for d in sequential)
        runs = grid_runs(asked - 1) if asked > MIN_BLACKBOX_RUNS else 0
        while runs >= MIN_BLACKBOX_RUNS and at(runs).seconds > budget:
            runs = grid_runs(runs - 1)
        if runs >= MIN_BLACKBOX_RUNS:
            eps = []
            for d in sequential:
                e = detectable(d.name, runs) if detectable else None
                full = detectable(d.name, d.blackbox_runs) if detectable else None
                if e is not None:
                    eps.append(f"{d.name} detects eps >= {e:.3g}"
                               + (f" instead of {full:.3g}" if full is not None else ""))
            return (f"{head}. With blackbox.sequential_runs={runs} (of {asked}) it takes about "
                    f"{_duration(at(runs).seconds)}" + (f" and {'; '.join(eps)}" if eps else "")
                    + f": run `dvc exp run -S blackbox.sequential_runs={runs}` for that smaller audit, or "
                      f"`dvc exp run -S {raise_to}` for the full one")
    return (f"{head}: run `dvc exp run -S {raise_to}`, or lower lidp.trials, ltu.risk_reference_models, "
            "ltu.reference_models or blackbox.runs, or restrict canaries.defenders")
