"""The plan before the work: calls, seconds per stage (batched trainers included), the budget as a guard
and its one-line message (issue 43: the plan never shrinks an audit behind the user's back)."""

from __future__ import annotations

import dataclasses

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.planning.cost import (MIN_BLACKBOX_RUNS, STAGE_STARTUP_S, WORKER_STARTUP_S, workers_pay, AuditSizes, DefenderInput,
                                     FitRate, OverBudgetError, grid_runs, plan_audit)
from privaudit.planning.fit_probe import LARGE, SMALL, rate_from_blocks

N = 900
SIZES = AuditSizes(reference_models=8, reference_fraction=0.5, risk_reference_models=32, ltu_jobs=2, game3_runs=1,
                   lidp_trials=32, lidp_canaries=6, block_trials=16, blackbox_block=1000, canary_jobs=1,
                   whitebox_runs=2)
FIXED = {s: (10.0, "measured") for s in ("ltu", "canaries", "one_run", "whitebox")}


def _user(seconds: float | None = 2.0, runs: int = 320, observable: bool = False) -> DefenderInput:
    return DefenderInput("mine", "python", batched=False, claims_epsilon=True, observable=observable,
                         rate=None if seconds is None else FitRate(seconds, n_rows=N), blackbox_runs=runs,
                         n_defender=N, n_reserved=N, sequential_runs=not observable)


def _dpsgd(call: float = 0.4, model: float = 0.03) -> DefenderInput:
    return DefenderInput("dpsgd", "dp_sgd", batched=True, claims_epsilon=True, observable=True,
                         rate=FitRate(model, call, N), blackbox_runs=2000, n_defender=N, n_reserved=N)


def test_fits_and_seconds_per_stage_follow_the_sizes() -> None:
    d = plan_audit([_user()], SIZES, fixed=FIXED).defenders[0]
    ltu, canaries = d.stage("ltu"), d.stage("canaries")
    # 8 reference models on half the Reserved set (1 s each: 2 workers would save 3.5 s < their 5 s start-up, so
    # in-process), 32 risk models on Defender-size sets (2 s each: they save 31 s, so on the 2 workers)
    assert (ltu.fits, ltu.workers, ltu.seconds) == (40, 2, pytest.approx(8 * 1.0 + 32 * 2.0 / 2))
    # 1 Game-3 run, 64 LiDP fits on N + 6 rows, 640 black-box fits on N + 1 rows
    assert canaries.fits == 1 + 64 + 640
    assert canaries.seconds == pytest.approx(2.0 + 64 * 2.0 * 906 / N + 640 * 2.0 * 901 / N)
    assert d.stage("one_run").fits == 1 and d.stage("whitebox").fits == 0  # not observable


def test_sequential_fits_go_to_workers_when_they_save_more_than_the_pools_start() -> None:
    """Issue 43: a fixed 0.5 s threshold kept 31 logistic-regression reference fits of 0.37 s each in one process
    on a 16-core machine (11 s that 16 workers do in under 1 s plus their start-up); on 2 cores a digits fit of
    0.05 s stays in-process."""
    assert workers_pay(0.37, 31, 16) and not workers_pay(0.05, 31, 2) and not workers_pay(0.028, 31, 2)
    assert not workers_pay(100.0, 31, 1) and not workers_pay(100.0, 1, 16) and not workers_pay(100.0, 0, 16)
    assert workers_pay(1.0, 11, 2, startup_s=5.0) and not workers_pay(1.0, 10, 2, startup_s=5.0)  # 5.5 vs 5.0 s


@given(t=st.floats(0.0, 100.0), fits=st.integers(0, 500), jobs=st.integers(1, 64))
def test_workers_pay_is_monotone_in_fit_time_and_count(t: float, fits: int, jobs: int) -> None:
    if workers_pay(t, fits, jobs):
        assert workers_pay(2 * t, fits, jobs) and workers_pay(t, fits + 1, jobs) and workers_pay(t, fits, jobs + 1)


def test_batched_trainers_are_timed_per_call_and_per_model() -> None:
    """Issue 43: the plan said "batched trainer, not timed"; a block of 1000 models costs one call + 1000 slopes."""
    d = plan_audit([_dpsgd()], SIZES, fixed=FIXED).defenders[0]
    pieces = dict(d.stage("canaries").pieces)
    assert pieces["blackbox"] == pytest.approx(4 * 0.4 + 4000 * 0.03 * 901 / N)  # 4 calls of 1000 models
    assert pieces["lidp"] == pytest.approx(2 * 0.4 + 64 * 0.03 * 906 / N)  # 2 blocks of 16 trials x 2 models
    assert d.stage("ltu").seconds == pytest.approx(2 * 0.4 + (8 * 450 / N + 32) * 0.03)  # one call each
    assert d.stage("whitebox").fits == 2 and d.seconds is not None and d.seconds > 120
    assert "0.4 s per call + 0.03 s per model" in plan_audit([_dpsgd()], SIZES, fixed=FIXED).lines()[0]


def test_the_slope_comes_from_two_block_sizes() -> None:
    call, model = rate_from_blocks(0.46, 0.64, n_small=2, n_large=8)
    assert (call, model) == (pytest.approx(0.4), pytest.approx(0.03))


def test_a_batched_defender_timed_on_a_cpu_shares_the_canary_workers() -> None:
    """On a CPU the canaries stage runs a batched defender's shards (one call each) on the compute.n_jobs workers
    like any other; on CUDA they train in the stage's own process: the plan divides by the workers only there
    (it did not: a 10k x 128 audit's canaries planned at 1.5x its wall on 2 cores)."""
    two = AuditSizes(**{**SIZES.__dict__, "canary_jobs": 2})
    gpu = plan_audit([_dpsgd()], two, fixed=FIXED).defenders[0].stage("canaries")
    cpu = plan_audit([dataclasses.replace(_dpsgd(), batched_on_workers=True)], two, fixed=FIXED).defenders[0]
    assert gpu.workers == 1 and cpu.stage("canaries").workers == 2
    assert cpu.stage("canaries").seconds == pytest.approx(gpu.seconds / 2)
    assert cpu.stage("ltu").workers == 1  # LTU's reference models train batched in the stage's process
    one_call = AuditSizes(**{**two.__dict__, "lidp_trials": 0, "game3_runs": 1, "block_trials": 16,
                              "blackbox_block": 100_000})  # game3 and the whole black-box audit: 2 calls
    few = plan_audit([dataclasses.replace(_dpsgd(), batched_on_workers=True)], AuditSizes(
        **{**one_call.__dict__, "canary_jobs": 8}), fixed=FIXED).defenders[0].stage("canaries")
    assert few.workers == few.calls == 2  # never more workers than calls


def test_work_on_many_workers_at_once_is_priced_at_their_measured_slowdown() -> None:
    """Two workers at once each ran 1.13-1.20x slower than alone on the 2 cores here; the 10k canaries stage ran
    0.71-0.77 of a plan that divided by the worker count. Work on w workers costs w / slowdown, not w; work in
    the stage's own process (one worker) and the one-run audit's single fit are not slowed; the white-box audit's
    runs go to the workers (session 56) and are."""
    two = AuditSizes(**{**SIZES.__dict__, "canary_jobs": 2, "whitebox_jobs": 2})
    plain = dataclasses.replace(_dpsgd(), batched_on_workers=True)
    slowed = dataclasses.replace(plain, rate=dataclasses.replace(plain.rate, slowdown=1.2, slowdown_workers=2))
    a, b = (plan_audit([d], two, fixed=FIXED).defenders[0] for d in (plain, slowed))
    assert b.stage("canaries").seconds == pytest.approx(1.2 * a.stage("canaries").seconds)
    for stage in ("ltu", "one_run"):  # in the stage's own process
        assert b.stage(stage).seconds == pytest.approx(a.stage(stage).seconds)
    assert b.stage("whitebox").seconds == pytest.approx(1.2 * a.stage("whitebox").seconds)
    one = AuditSizes(**{**SIZES.__dict__, "canary_jobs": 1})
    assert (plan_audit([slowed], one, fixed=FIXED).defenders[0].stage("canaries").seconds
            == pytest.approx(plan_audit([plain], one, fixed=FIXED).defenders[0].stage("canaries").seconds))
    with pytest.raises(ValueError, match="slowdown must be >= 1"):
        FitRate(1.0, slowdown=0.9, slowdown_workers=2)


@given(slowdown=st.floats(1.0, 4.0), measured=st.integers(1, 64), workers=st.integers(1, 128))
def test_contention_grows_with_the_workers_from_one_to_the_measured_slowdown(slowdown: float, measured: int,
                                                                             workers: int) -> None:
    r = FitRate(1.0, slowdown=slowdown, slowdown_workers=measured)
    c = r.contention(workers)
    assert 1.0 <= c <= slowdown + 1e-12 and r.contention(1) == 1.0
    assert r.contention(workers + 1) >= c
    if measured > 1 and workers >= measured:
        assert c == pytest.approx(slowdown)


def test_fixed_cost_is_counted_once_per_stage_not_per_defender() -> None:
    many = [DefenderInput(f"d{i}", "logistic_regression", False, False, False, FitRate(0.01, n_rows=N), 32, N, N)
            for i in range(20)]
    one, plan = plan_audit(many[:1], SIZES, fixed=FIXED), plan_audit(many, SIZES, fixed=FIXED)
    assert one.startup_seconds == plan.startup_seconds == 30.0  # ltu, canaries, one_run (no whitebox fits)
    assert plan.seconds == pytest.approx(20 * (one.seconds - 30.0) + 30.0)
    guessed = plan_audit(many[:1], AuditSizes(**{**SIZES.__dict__, "canary_jobs": 2}))
    assert dict((s, v) for s, v, _ in guessed.fixed) == {"ltu": STAGE_STARTUP_S, "one_run": STAGE_STARTUP_S,
                                                         "canaries": STAGE_STARTUP_S + WORKER_STARTUP_S}
    # a first plan: the measured start-up of a stage (the plan stage passes the defenders stage's), plus the start
    # of the worker pool the audit's device gets (forked: well under loky's), only where a stage starts one
    forked = plan_audit(many[:1], AuditSizes(**{**SIZES.__dict__, "canary_jobs": 2, "pool_startup_s": 0.5}),
                        fixed={"one_run": (1.0, "measured")}, startup=(2.5, "the defenders stage's start-up"))
    assert dict((s, v) for s, v, _ in forked.fixed) == {"ltu": 2.5, "one_run": 1.0, "canaries": 3.0}
    assert [why for s, _, why in forked.fixed if s == "canaries"] == [
        "the defenders stage's start-up + a worker pool's start (0.5 s)"]
    with pytest.raises(ValueError, match="pool_startup_s"):
        AuditSizes(pool_startup_s=-1.0)
    # work besides fits measured before a stage has run (the LTU stage's scoring) is added to its first-plan
    # fixed cost; a stage with a recorded wall keeps that wall
    scored = plan_audit(many[:1], SIZES, startup=(2.5, "start-up"),
                        work={"ltu": (4.0, "its scoring"), "one_run": (9.0, "never used")},
                        fixed={"one_run": (1.0, "measured")})
    assert dict((s, v) for s, v, _ in scored.fixed) == {"ltu": 6.5, "one_run": 1.0, "canaries": 2.5}
    assert [why for s, _, why in scored.fixed if s == "ltu"] == ["start-up + its scoring"]


def test_the_sizes_are_the_params_whatever_the_budget_or_the_timings() -> None:
    """Issue 43: the budget never shrinks an audit; the same params give the same sizes at any fit time."""
    for seconds in (0.001, 0.5, 5.0):
        plan = plan_audit([_user(seconds=seconds), _dpsgd()], SIZES, fixed=FIXED)
        assert plan.runs_per_side() == {"mine": 320, "dpsgd": 2000}


def _over(seconds: float = 2.0, budget_min: float = 15.0) -> str:
    sizes = AuditSizes(**{**SIZES.__dict__, "budget_seconds": 60.0 * budget_min})
    with pytest.raises(OverBudgetError) as err:
        plan_audit([_user(seconds=seconds)], sizes, fixed=FIXED,
                   detectable=lambda name, runs: {96: 5.7, 320: 3.1}.get(runs, 4.0))
    return str(err.value)


def test_over_budget_stops_in_one_line_naming_the_smaller_audit_its_epsilon_and_the_command() -> None:
    msg = _over()
    assert "\n" not in msg and "compute.budget_minutes is 15" in msg
    runs = int(re.search(r"blackbox\.sequential_runs=(\d+) \(of 320\)", msg).group(1))
    assert runs == grid_runs(runs) and MIN_BLACKBOX_RUNS <= runs < 320
    assert f"`dvc exp run -S blackbox.sequential_runs={runs}`" in msg and "instead of 3.1" in msg
    assert re.search(r"`dvc exp run -S compute.budget_minutes=\d+`", msg)
    # the proposed count fits the budget; the next grid count up does not
    at = lambda r: plan_audit([_user(runs=r)], SIZES, fixed=FIXED).seconds  # noqa: E731
    assert at(runs) <= 900 < at(min(320, grid_runs(runs * 1.3)))


def test_over_budget_with_nothing_to_shrink_names_the_budget_and_the_sizes() -> None:
    msg = _over(seconds=20.0, budget_min=5.0)  # even 32 runs per side do not fit
    assert "blackbox.sequential_runs=" not in msg and "compute.budget_minutes=" in msg and "lidp.trials" in msg


def test_an_untimed_trainer_is_named_and_keeps_its_sizes() -> None:
    plan = plan_audit([_user(seconds=None)], SIZES, fixed=FIXED)
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
def test_a_proposed_smaller_audit_always_fits_its_budget(seconds: float, budget: float, jobs: int) -> None:
    sizes = AuditSizes(**{**SIZES.__dict__, "budget_seconds": budget, "canary_jobs": jobs})
    try:
        plan_audit([_user(seconds=seconds)], sizes, fixed=FIXED)
    except OverBudgetError as err:
        m = re.search(r"blackbox\.sequential_runs=(\d+) ", str(err))
        if m:
            assert plan_audit([_user(seconds=seconds, runs=int(m.group(1)))], AuditSizes(
                **{**sizes.__dict__, "budget_seconds": None}), fixed=FIXED).seconds <= budget


def test_a_truncated_call_model_is_recovered_from_three_timed_calls() -> None:
    """A long batched recipe is timed on truncated calls (fit_probe): f + u (c + M s) is recovered exactly."""
    from privaudit.planning.fit_probe import LONG_FACTOR, rate_from_truncated

    f, c, s, k, full = 0.7, 0.004, 0.0009, 64, 7820
    t = lambda m, u: f + u * (c + m * s)  # noqa: E731
    call, model = rate_from_truncated(t(SMALL, k), t(LARGE, k), t(SMALL, 2 * k), k, full)
    assert call == pytest.approx(f + full * c) and model == pytest.approx(full * s)
    long = LONG_FACTOR * k  # the probe's second small call
    assert rate_from_truncated(t(SMALL, k), t(LARGE, k), t(SMALL, long), k, full, k_long=long) == pytest.approx(
        (call, model))


def test_a_longer_second_small_call_narrows_the_per_call_cost_under_timing_noise() -> None:
    """Simulation with a known truth: each timed call is off by a factor 1 + N(0, 0.12) (a loaded host), the probe
    keeps medians of three, and the full call's per-call cost multiplies the per-step difference of the two small
    calls by the full length. With the second small call at LONG_FACTOR k instead of 2k the planned per-call cost
    of the default MLP's shape (30 epochs, c = 0.04 s an epoch) spreads 0.61 times as much (a proportional error:
    sqrt((1 + 16) / 9 / (1 + 4)); an additive one would be divided by three), centred on the truth. The same
    seeded draws of the first two calls for both designs."""
    import numpy as np

    from privaudit.planning.fit_probe import LONG_FACTOR, REPEATS, rate_from_truncated

    f, c, s, k, full, large = 0.01, 0.04, 0.01, 1, 30, 64
    t = lambda m, u: f + u * (c + m * s)  # noqa: E731
    truth = f + full * c
    rng = np.random.default_rng(0)
    calls: dict[int, list[float]] = {2 * k: [], LONG_FACTOR * k: []}
    for _ in range(2000):
        noisy = lambda m, u: float(np.median(t(m, u) * (1 + 0.12 * rng.standard_normal(REPEATS))))  # noqa: E731
        small, big = noisy(SMALL, k), noisy(large, k)
        for long in calls:
            calls[long].append(rate_from_truncated(small, big, noisy(SMALL, long), k, full, n_large=large,
                                                   k_long=long)[0] / truth)
    spread = {long: np.subtract(*np.percentile(v, [95, 5])) for long, v in calls.items()}
    assert spread[LONG_FACTOR * k] < 0.7 * spread[2 * k], spread
    assert abs(np.median(calls[LONG_FACTOR * k]) - 1) < 0.05
    with pytest.raises(ValueError, match="k_long=1"):
        rate_from_truncated(1.0, 2.0, 1.5, 1, 30, k_long=1)


@given(st.floats(0, 2), st.floats(0, 0.1), st.floats(0, 0.1), st.floats(-0.5, 0.5), st.floats(-0.5, 0.5),
       st.sampled_from([None, 1, 3, 10]))
@settings(max_examples=60, deadline=None)
def test_truncated_rates_are_never_negative_whatever_the_noise(f: float, c: float, s: float, e1: float,
                                                              e2: float, kl: int | None) -> None:
    from privaudit.planning.fit_probe import rate_from_truncated

    t = lambda m, u: f + u * (c + m * s)  # noqa: E731
    call, model = rate_from_truncated(t(SMALL, 10) + e1, t(LARGE, 10 if kl is None else kl), t(SMALL, 20) + e2, 10,
                                      1000, k_large=kl)
    assert call >= 0 and model >= 0


@given(f=st.floats(0, 2), c=st.floats(0, 0.01), s=st.floats(1e-6, 1e-3), large=st.integers(33, 1000),
       kl=st.integers(1, 64))
@settings(max_examples=60, deadline=None)
def test_a_large_call_of_fewer_steps_recovers_the_same_model(f: float, c: float, s: float, large: int, kl: int) -> None:
    """Property: the large call may run fewer steps than the small ones (a 1000-model block timed on 8 steps):
    f + u (c + M s) is still recovered exactly, for any block size and length."""
    from privaudit.planning.fit_probe import rate_from_truncated

    t = lambda m, u: f + u * (c + m * s)  # noqa: E731
    call, model = rate_from_truncated(t(SMALL, 64), t(large, kl), t(SMALL, 128), 64, 7820, n_large=large, k_large=kl)
    assert call == pytest.approx(f + 7820 * c, rel=1e-6, abs=1e-6) and model == pytest.approx(7820 * s, rel=1e-6)


def test_on_cuda_the_large_call_timed_at_two_lengths_recovers_a_graphed_calls_cost() -> None:
    """On CUDA a call's first SGD epoch runs eagerly (launch-bound: the same at any M) and the later ones are replayed
    graphs (their cost grows with M). Timed at k = 2 epochs only, the large call's per-model cost came out as the mean
    of its eager epoch's and one replayed epoch's: about half, and a 64-model, 30-epoch call planned 23 % short here;
    the large call timed at 2k too gives the replayed epoch's own cost, and the plan is within 2 % (what is left: the
    eager epoch counted once per call at the small calls' M)."""
    from privaudit.planning.fit_probe import LONG_FACTOR, rate_from_truncated

    eager, capture, r0, r1 = 0.40, 0.05, 0.08, 0.0015  # seconds: eager epoch, captures, replayed epoch + per model
    t = lambda m, u: eager + capture + (u - 1) * (r0 + r1 * m)  # noqa: E731
    k, full, large = 2, 30, 64
    truth = t(large, full)
    long = LONG_FACTOR * k  # the probe's second small call
    one = rate_from_truncated(t(SMALL, k), t(large, k), t(SMALL, long), k, full, n_large=large, k_large=k, k_long=long)
    two = rate_from_truncated(t(SMALL, k), t(large, k), t(SMALL, long), k, full, n_large=large, k_large=k, k_long=long,
                              t_large_2k=t(large, 2 * k))
    assert (one[0] + large * one[1]) / truth < 0.8  # 0.77
    assert two[1] == pytest.approx(full * r1) and (two[0] + large * two[1]) / truth == pytest.approx(1, abs=0.02)


def _probed_dp_calls(monkeypatch: pytest.MonkeyPatch, block: int) -> tuple[set[tuple[int, int]], str]:
    """The (models, DP-SGD steps) of every call the probe times for a 20-epoch DP-SGD recipe on 20 000 rows (the
    trainer stubbed), and its ``timed_by``."""
    import numpy as np

    import privaudit.train as train
    from privaudit.defenders.specs import DpSgdSpec
    from privaudit.planning import fit_probe

    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(train, "train_heads", lambda recipe, data, *a, **k: seen.append((data.n_models,
                                                                                          recipe.dp.steps)))
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20000, 4)).astype(np.float32), rng.integers(0, 2, 20000)
    spec = DpSgdSpec(name="dp", kind="dp_sgd", epsilon=1.0, epochs=20, batch_size=64)
    how = fit_probe.measure_fit_rate(spec, X, y, 2, "cpu", 0, block=block).timed_by
    return set(seen), how


def test_the_large_call_is_timed_twice_only_where_graphs_change_the_first_steps(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``large_call_twice`` (CUDA) adds the large call at twice its length to the probe; on the CPU it is not run."""
    from privaudit.planning import fit_probe

    k, m = fit_probe.PROBE_DP_STEPS, fit_probe.MIN_LARGE_STEPS
    assert (1000, 2 * m) not in _probed_dp_calls(monkeypatch, 1000)[0]
    monkeypatch.setattr(fit_probe, "large_call_twice", lambda device: True)  # as on CUDA (no GPU here)
    seen, how = _probed_dp_calls(monkeypatch, 1000)
    assert seen == {(SMALL, k), (1000, m), (1000, 2 * m), (SMALL, fit_probe.LONG_FACTOR * k)}
    assert f"1000 x {2 * m}" in how


def test_the_probe_times_the_slope_on_a_block_as_large_as_the_canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canaries train DP-SGD in 1000-model black-box blocks, whose per-model step cost at 5 000 x 128 was 1.55x
    the slope of calls of 2 and 32 models (planned 85 s, took 131 s): the large call now has the block's models, on
    the CPU over fewer steps (8), on CUDA over the same 64 (the graph path); without a block, 32 models as before."""
    from privaudit.planning import fit_probe

    k = fit_probe.PROBE_DP_STEPS
    for block, want in ((1000, (1000, fit_probe.MIN_LARGE_STEPS)), (fit_probe.LARGE, (fit_probe.LARGE, k))):
        seen, how = _probed_dp_calls(monkeypatch, block)
        assert seen == {(SMALL, k), want, (SMALL, fit_probe.LONG_FACTOR * k)}, seen
        assert f"{want[0]} x {want[1]}" in how
    assert fit_probe.large_call_length(k, 1000, "cuda:0", True) == k  # no host here: the CUDA length alone
    assert fit_probe.probe_block(1000, 2000) == 1000 and fit_probe.probe_block(1000, 4) == fit_probe.LARGE


def test_a_long_dp_sgd_recipe_is_timed_on_truncated_calls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 50 000 x 512 the probe timed seven whole 7 820-step calls (minutes on an H200): now every timed call
    runs a few graphs' worth of steps, and a short recipe is still timed whole."""
    import numpy as np

    import privaudit.train as train
    from privaudit.defenders.recipes import recipe_from_spec
    from privaudit.defenders.specs import DpSgdSpec
    from privaudit.planning import fit_probe
    from privaudit.train.static_steps import STEPS_PER_GRAPH

    assert fit_probe.PROBE_DP_STEPS >= 2 * STEPS_PER_GRAPH  # a truncated call on CUDA takes the graph path too
    seen: list[tuple[int, int]] = []

    def fake(recipe, data, n_classes, gen):  # noqa: ANN001, ANN202
        seen.append((recipe.dp.steps, data.n_models))

    monkeypatch.setattr(train, "train_heads", fake)
    rng = np.random.default_rng(0)
    for n, whole in ((20000, False), (300, True)):
        seen.clear()
        X, y = rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 2, n)
        spec = DpSgdSpec(name="dp", kind="dp_sgd", epsilon=1.0, epochs=20, batch_size=64)
        full = recipe_from_spec(spec, n, 2).dp.steps
        how = fit_probe.measure_fit_rate(spec, X, y, 2, "cpu", 0).timed_by
        steps = {s for s, _ in seen}
        if whole:
            assert len(steps) == 1 and "truncated" not in how
        else:
            assert steps == {fit_probe.PROBE_DP_STEPS, fit_probe.LONG_FACTOR * fit_probe.PROBE_DP_STEPS}, steps
            assert f"scaled to {full} steps" in how
            assert len(seen) == 1 + 3 * 3  # a warm-up, then three medians of three


def test_an_sgd_probe_on_cuda_takes_the_full_calls_graph_path() -> None:
    """On CUDA, SGD epochs run in CUDA graphs from two epochs (``train.cuda_graphs``): the truncated calls that
    time an SGD recipe there run 2 and 4 epochs, so that both take the full call's path and their difference is
    replayed epochs (1 and 2 would compare an eager epoch with a captured one); on the CPU one epoch is the least."""
    from types import SimpleNamespace

    from privaudit.planning import fit_probe
    from privaudit.train import batched

    cuda_data = SimpleNamespace(n_grad=0, X_base=SimpleNamespace(device=SimpleNamespace(type="cuda")))
    k = fit_probe.probe_length(False, "cuda:0")
    assert batched._sgd_graphs_fit("auto", cuda_data, k) and batched._sgd_graphs_fit("auto", cuda_data, 2 * k)
    assert not batched._sgd_graphs_fit("auto", cuda_data, 1)
    assert fit_probe.truncated_lengths(30, k) == (k, fit_probe.LONG_FACTOR * k)  # the default MLP's 30 epochs
    assert fit_probe.probe_length(False, "cpu") == fit_probe.PROBE_EPOCHS == 1


def test_single_model_audits_of_a_batched_defender_cost_its_own_trainers_fit() -> None:
    """The one-run and white-box audits train single models with the defender's own trainer (opacus for dp_sgd),
    not with the batched trainer: planned at its release fit's seconds, not at a batched model's (measured at
    10k x 128: 7.1 s a fit against 0.36 s; the white-box stage was planned at 2.0 s for 13.9 s)."""
    sizes = AuditSizes(**{**SIZES.__dict__, "whitebox_runs": 2})
    batched_only = plan_audit([_dpsgd()], sizes, fixed=FIXED).defenders[0]
    with_single = plan_audit([dataclasses.replace(_dpsgd(), single_rate=FitRate(7.0, 0.0, N, "release fit"))],
                             sizes, fixed=FIXED).defenders[0]
    assert with_single.stage("whitebox").seconds == pytest.approx(2 * 7.0)
    assert with_single.stage("one_run").seconds == pytest.approx(7.0)
    assert batched_only.stage("whitebox").seconds == pytest.approx(2 * (0.4 + 0.03))
    for stage in ("ltu", "canaries"):  # the batched work keeps the batched rate
        assert with_single.stage(stage).seconds == pytest.approx(batched_only.stage(stage).seconds)
    # a sequential defender's rate already is one fit of its trainer: single_rate is not used for it
    user = _user()
    assert plan_audit([dataclasses.replace(user, single_rate=FitRate(99.0, 0.0, N))], sizes,
                      fixed=FIXED).defenders[0].stage("one_run").seconds == pytest.approx(
        plan_audit([user], sizes, fixed=FIXED).defenders[0].stage("one_run").seconds)


def test_the_one_run_run_is_unwatched_and_the_white_box_runs_watched() -> None:
    """The release fit of an observable defender is watched (its recording cost observing_seconds of it); the
    one-run audit's run is not (at 10k x 128 an opacus fit took 5.9-6.7 s watched, 3.5-3.8 s not: the one-run
    stage ran 0.73-0.83 of its plan), the white-box audit's runs are. A sequential observable trainer's probe fits
    are unwatched: its white-box runs cost them plus the recording."""
    sizes = AuditSizes(**{**SIZES.__dict__, "whitebox_runs": 2})
    dp = dataclasses.replace(_dpsgd(), single_rate=FitRate(7.0, 0.0, N, "release fit"), observing_seconds=2.5)
    d = plan_audit([dp], sizes, fixed=FIXED).defenders[0]
    assert d.stage("one_run").seconds == pytest.approx(7.0 - 2.5)
    assert d.stage("whitebox").seconds == pytest.approx(2 * 7.0)
    user = dataclasses.replace(_user(2.0, observable=True), observing_seconds=0.5)
    u = plan_audit([user], sizes, fixed=FIXED).defenders[0]
    assert u.stage("one_run").seconds == pytest.approx(2.0) and u.stage("whitebox").seconds == pytest.approx(2 * 2.5)
    # a defender that is not observable has no recording to add or take away
    plain = plan_audit([dataclasses.replace(_user(2.0), observing_seconds=0.5)], sizes, fixed=FIXED).defenders[0]
    assert plain.stage("one_run").seconds == pytest.approx(2.0) and plain.stage("whitebox").fits == 0


@pytest.mark.parametrize("runs, jobs, rounds, workers", [(2, 1, 2, 1), (2, 2, 1, 2), (3, 2, 2, 2), (2, 8, 1, 2)])
def test_whitebox_runs_on_the_workers_take_rounds_of_fits(runs, jobs, rounds, workers) -> None:
    """The white-box audit spreads its runs over compute.n_jobs workers (at most one run each): ⌈runs / workers⌉
    watched fits one after the other, at the defender's measured contention; the worker pool's start is in the
    stage's fixed cost."""
    d = _dpsgd()
    d = dataclasses.replace(d, rate=dataclasses.replace(d.rate, slowdown=1.3, slowdown_workers=2))
    sizes = AuditSizes(**{**SIZES.__dict__, "whitebox_jobs": jobs, "whitebox_runs": runs})
    one_fit = plan_audit([d], AuditSizes(**{**SIZES.__dict__, "whitebox_jobs": 1, "whitebox_runs": 1}),
                         fixed=FIXED).defenders[0].stage("whitebox").seconds
    wb = plan_audit([d], sizes, fixed=FIXED).defenders[0].stage("whitebox")
    slow = 1.3 if workers > 1 else 1.0
    assert (wb.fits, wb.workers) == (runs, workers)
    assert wb.seconds == pytest.approx(rounds * one_fit * slow)


def test_the_plan_stage_sizes_whitebox_workers_by_device() -> None:
    """On the CPU the white-box runs go to compute.n_jobs workers; on CUDA they stay in the stage's process (the
    audit stage passes one worker there), and the plan says the same."""
    from privaudit.config import load_params
    from stages.plan import sizes_of

    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    assert sizes_of(params, "cpu").whitebox_jobs == params.compute.workers()
    assert sizes_of(params, "cuda:0").whitebox_jobs == 1
    with pytest.raises(ValueError, match="worker counts"):
        AuditSizes(whitebox_jobs=0)
