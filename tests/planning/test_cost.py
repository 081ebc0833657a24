"""The plan before the work: fits, seconds, the budget arithmetic and the stop message."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.planning.cost import (MIN_BLACKBOX_RUNS, STAGE_STARTUP_S, WORKER_STARTUP_S, AuditSizes, DefenderInput, OverBudgetError, grid_runs,
                                     plan_audit)
from privaudit.planning.progress import FitProgress

SIZES = AuditSizes(ltu_fits=40, ltu_jobs=2, game3_fits=1, lidp_fits=64, whitebox_runs=2, canary_jobs=1,
                   budget_seconds=None)


def _user(seconds: float | None = 2.0, runs: int = 320, observable: bool = False) -> DefenderInput:
    return DefenderInput("mine", "python", batched=False, claims_epsilon=True, observable=observable,
                         seconds_per_fit=seconds, blackbox_runs=runs)


def test_fits_and_seconds_per_stage_follow_the_sizes() -> None:
    d = plan_audit([_user()], SIZES).defenders[0]
    stages = {s.stage: s for s in d.stages}
    # fits x seconds / workers
    assert (stages["ltu"].fits, stages["ltu"].workers, stages["ltu"].seconds) == (40, 2, 40.0)
    assert (stages["canaries"].fits, stages["canaries"].seconds) == (1 + 64 + 640, 705 * 2.0)
    assert stages["one_run"].fits == 1 and stages["whitebox"].fits == 0  # not observable
    assert d.fits == 746 and d.seconds == pytest.approx(40 + 1410 + 2)


def test_stage_start_up_is_counted_once_per_stage_not_per_defender() -> None:
    """Each stage is one process that fits every defender: 20 quick defenders pay its start-up once."""
    many = [DefenderInput(f"d{i}", "logistic_regression", False, False, False, 0.01, 32) for i in range(20)]
    one = plan_audit(many[:1], SIZES)
    plan = plan_audit(many, SIZES)
    startup = 3 * STAGE_STARTUP_S + WORKER_STARTUP_S  # ltu (2 workers), canaries, one_run; no whitebox fits
    assert one.startup_seconds == plan.startup_seconds == startup
    assert plan.seconds == pytest.approx(20 * (one.seconds - startup) + startup)


def test_batched_trainers_are_listed_but_not_timed() -> None:
    dp = DefenderInput("dp", "dp_sgd", batched=True, claims_epsilon=True, observable=True, seconds_per_fit=0.5,
                       blackbox_runs=2000)
    plan = plan_audit([dp], SIZES)
    assert plan.defenders[0].seconds is None and plan.seconds == 0.0
    assert "batched trainer, not timed" in plan.lines()[0]
    assert plan.defenders[0].fits == 40 + 1 + 64 + 4000 + 1 + 2


def test_the_budget_shrinks_only_the_sequential_claimants_black_box_runs() -> None:
    logreg = DefenderInput("logreg", "logistic_regression", batched=False, claims_epsilon=False, observable=False,
                           seconds_per_fit=0.01, blackbox_runs=32)
    plan = plan_audit([_user(), logreg], AuditSizes(**{**SIZES.__dict__, "budget_seconds": 600.0}))
    runs = plan.runs_per_side()
    assert runs["logreg"] == 32 and MIN_BLACKBOX_RUNS <= runs["mine"] < 320
    assert runs["mine"] == grid_runs(runs["mine"])  # on the grid
    assert plan.seconds <= 600.0
    # the next grid count would not have fitted
    nxt = min(v for v in (m * 2 ** k for k in range(3, 12) for m in (4, 5, 6, 7)) if v > runs["mine"])
    over = plan_audit([_user(runs=nxt), logreg], SIZES)
    assert over.seconds > 600.0
    assert [d.name for d in plan.resized()] == ["mine"] and "sized to compute.budget_minutes" in plan.lines()[0]


def test_within_budget_nothing_changes() -> None:
    plan = plan_audit([_user()], AuditSizes(**{**SIZES.__dict__, "budget_seconds": 3600.0}))
    assert plan.runs_per_side() == {"mine": 320} and plan.resized() == ()


def test_over_budget_even_at_the_smallest_size_stops_naming_the_params() -> None:
    with pytest.raises(OverBudgetError) as err:
        plan_audit([_user(seconds=30.0)], AuditSizes(**{**SIZES.__dict__, "budget_seconds": 600.0}))
    msg = str(err.value)
    assert "\n" not in msg
    for key in ("compute.budget_minutes", "compute.n_jobs", "lidp.trials", "ltu.risk_reference_models",
                "canaries.defenders", "mine", "30 s per fit"):
        assert key in msg


def test_an_untimed_trainer_is_named_and_keeps_its_sizes() -> None:
    plan = plan_audit([_user(seconds=None)], AuditSizes(**{**SIZES.__dict__, "budget_seconds": 1.0}))
    assert plan.runs_per_side() == {"mine": 320}
    assert any("no fit time recorded for mine" in line for line in plan.lines())


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0.0, max_value=1e6))
def test_grid_counts_are_on_the_grid_and_below_the_limit(limit: float) -> None:
    v = grid_runs(limit)
    if limit < MIN_BLACKBOX_RUNS:
        assert v == 0
    else:
        assert MIN_BLACKBOX_RUNS <= v <= limit and v % 8 == 0
        assert v > limit / 1.3  # at most one grid step below the limit (ratios 5/4, 6/5, 7/6, 8/7)


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=0.05, max_value=10.0), st.floats(min_value=300.0, max_value=20000.0),
       st.integers(min_value=1, max_value=4))
def test_a_sized_plan_always_fits_its_budget(seconds: float, budget: float, jobs: int) -> None:
    sizes = AuditSizes(**{**SIZES.__dict__, "budget_seconds": budget, "canary_jobs": jobs})
    try:
        plan = plan_audit([_user(seconds=seconds)], sizes)
    except OverBudgetError:
        smallest = plan_audit([_user(seconds=seconds, runs=MIN_BLACKBOX_RUNS)], AuditSizes(
            **{**sizes.__dict__, "budget_seconds": None}))
        assert smallest.seconds > budget
        return
    assert plan.seconds <= budget


def test_progress_lines_give_rate_and_eta() -> None:
    now = [0.0]
    out = io.StringIO()
    with FitProgress("canaries", 64, "trial", bar=False, out=out, clock=lambda: now[0]) as p:
        now[0] = 10.0
        p.advance(16, "mine blackbox 0-16")
        now[0] = 20.0
        p.advance(16, "mine blackbox 16-32")
    lines = out.getvalue().splitlines()
    assert lines[0] == "canaries: mine blackbox 0-16 done; 16 of 64 trials, 1.6 trials/s, ETA 0:30"
    assert lines[1].endswith("32 of 64 trials, 1.6 trials/s, ETA 0:20")
