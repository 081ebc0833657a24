"""Issues 35/43: the defenders stage times each release fit and then the fits after it; the plan stage prints
fits, seconds per fit and the estimate, writes the sizes the params ask (whatever the timings or ltu.*), and
stops over compute.budget_minutes naming a smaller audit and the command.
Runs the split, featurize, defenders and plan stages in-process on a tiny table with a slow user trainer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.artifacts import read_json, write_json
from privaudit.data.sources import SourceData, save_source
from privaudit.data.sources.base import make_ids
from privaudit.planning.plan_files import read_sized_runs
from privaudit.planning.timings import read_fit_times
from stages import canaries as canaries_stage
from stages import defenders as defenders_stage
from stages import featurize as featurize_stage
from stages import plan as plan_stage
from stages import split as split_stage
from stages._runner import run_stage

SLOW = '''import time

from sklearn.linear_model import LogisticRegression


def train(X, y, n_classes, seed):
    time.sleep(0.3)  # a trainer whose fit costs a known time
    return LogisticRegression(max_iter=200).fit(X, y)
'''


def _params(tmp: Path, blackbox: dict[str, object] | None = None, **compute: object) -> None:
    params = {"base": {"seed": 1, "device": "cpu"}, "lidp": {"trials": 4}, "game3": {"canaries": 6},
              # worker counts pinned (their default, auto, is the machine's cores): the printed plan names them
              "compute": {"n_jobs": 1, **compute}, "ltu": {"risk_reference_models": 0, "n_jobs": 2},
              "blackbox": blackbox or {},
              "defenders": [{"name": "logreg", "kind": "logistic_regression"},
                            {"name": "mine", "kind": "python", "target": "slow_trainer.py:train", "claimed_epsilon": 1.0,
                             "claimed_delta": 1e-5}]}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("plan")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)
    save_source(SourceData(X=X, y=y, ids=make_ids("t", len(y)),
                           meta={"name": "t", "n_classes": 3, "class_names": ["a", "b", "c"], "modality": "tabular",
                                 "image_shape": None, "origin": "test"}), tmp / "source")
    (tmp / "slow_trainer.py").write_text(SLOW)
    _params(tmp)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        for stage, name, argv in (
                (split_stage, "split", ["--source", "source", "--out", "split"]),
                (featurize_stage, "featurize", ["--source", "source", "--split", "split", "--out", "features"]),
                (defenders_stage, "defenders", ["--features", "features", "--split", "split", "--out", "defenders",
                                                "--timings", "timings/fits.json"])):
            assert run_stage(name, stage._args, stage._body, argv=["--params", "params.yaml", *argv]) == 0
    return tmp


def _stage_line(capsys: pytest.CaptureFixture[str], stage: str) -> str:
    """The plan's printed line of ``stage`` (from what the test captured so far)."""
    return next(l for l in capsys.readouterr().out.splitlines() if l.startswith(f"plan: stage {stage}:"))


def _plan(tmp: Path, out: str) -> int:
    return run_stage("plan", plan_stage._args, plan_stage._body,
                     argv=["--params", "params.yaml", "--defenders", "defenders", "--features", "features",
                           "--timings", "timings/fits.json", "--out", out])


def test_the_defenders_stage_times_each_release_fit_and_the_fits_after_it(trained: Path) -> None:
    times = read_fit_times(trained / "timings" / "fits.json")
    assert set(times) == {"logreg", "mine"}
    assert 0.3 <= times["mine"].seconds < 5.0 and times["logreg"].seconds < times["mine"].seconds
    assert times["mine"].model_seconds is not None and 0.3 <= times["mine"].model_seconds < 5.0
    assert "median of 3 fits" in times["mine"].timed_by and times["logreg"].model_seconds is not None
    assert not any(p.name == "fits.json" for p in (trained / "defenders").rglob("*"))  # not a DVC output


def test_the_plan_prints_fits_seconds_and_estimate(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(trained)
    _params(trained)
    assert _plan(trained, "plan") == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("plan: mine (python)"))
    # ltu 8 reference models, canaries 1 + 8 + 640, one_run 1
    # the reference fits go to 2 workers when a fit takes >= 0.5 s (a busy machine)
    assert re.search(r"658 fits \(ltu 8( on 2 workers)?, canaries 649, one_run 1\)", line), line
    assert "s per fit (median of 3 fits" in line
    assert "budget 30.0 min (compute.budget_minutes)" in out and "plan: stage canaries: about" in out
    assert read_sized_runs(trained / "plan") == {"logreg": 32, "mine": 320}
    estimate = read_json(trained / "timings" / "plan.json")
    assert estimate["defenders"]["mine"]["fits"] == 658 and estimate["estimated_seconds"] > 0.3 * 658
    assert estimate["stages"]["canaries"]["fits_seconds"] > 0.3 * 649


def test_the_sizes_file_depends_on_neither_ltu_params_nor_timings(trained: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: `dvc exp run -S ltu.rounds=500` re-timed, resized and reran the canary audit. The canaries stage
    depends on data/plan/sizes.json: its bytes must not change with ltu.* nor with the timing history."""
    monkeypatch.chdir(trained)
    _params(trained)
    assert _plan(trained, "plan_a") == 0
    base = (trained / "plan_a" / "sizes.json").read_bytes()
    params = yaml.safe_load((trained / "params.yaml").read_text())
    params["ltu"].update(rounds=500, reference_models=4)
    (trained / "params.yaml").write_text(yaml.safe_dump(params))
    assert _plan(trained, "plan_b") == 0
    assert (trained / "plan_b" / "sizes.json").read_bytes() == base
    # another timing history: every fit 40x slower (still within the budget)
    times = read_json(trained / "timings" / "fits.json")
    for entry in times.values():
        entry.update(seconds=entry["seconds"] * 40, model_seconds=entry["model_seconds"] * 2, audit_seconds=None)
    write_json(trained / "timings" / "fits.json", times)
    assert _plan(trained, "plan_c") == 0
    assert (trained / "plan_c" / "sizes.json").read_bytes() == base
    assert read_json(trained / "plan_c" / "sizes.json")["blackbox_runs_per_side"] == {"logreg": 32, "mine": 320}


def test_over_budget_stops_in_one_line_names_a_smaller_audit_and_writes_nothing(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The budget is a guard: the plan stage stops before any expensive stage, naming the estimate, the budget,
    the largest blackbox.sequential_runs that fits, the eps that smaller audit detects and the command."""
    from privaudit.planning.timings import record_stage_wall

    monkeypatch.chdir(trained)
    _params(trained, budget_minutes=None)
    assert _plan(trained, "plan_free") == 0
    # every audit stage "ran": their fixed costs are read, not re-timed by each plan (a first plan times the LTU
    # and one-run stages' work on synthetic data, which varies from plan to plan by more than the margin below)
    for stage in ("ltu", "canaries", "one_run"):
        record_stage_wall(stage, 2.0 + read_json(trained / "timings" / "plan.json")["stages"][stage]["fits_seconds"],
                          trained / "timings")
    try:
        assert _plan(trained, "plan_free") == 0
        estimate = read_json(trained / "timings" / "plan.json")
        blackbox = estimate["defenders"]["mine"]["stages"]["canaries"]["pieces"]["blackbox"]
        budget = round((estimate["estimated_seconds"] - 0.6 * blackbox) / 60, 2)  # 320 runs do not fit, 96 do
        _params(trained, budget_minutes=budget)
        assert _plan(trained, "plan_small") == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("stage plan failed: the audit needs about") and "\n" not in err
        assert f"compute.budget_minutes is {budget:g}" in err
        m = re.search(r"With blackbox\.sequential_runs=(\d+) \(of 320\) it takes about .* and mine detects eps >= "
                      r"[0-9.]+ instead of [0-9.]+: run `dvc exp run -S blackbox\.sequential_runs=(\d+)`", err)
        assert m and m.group(1) == m.group(2) and 32 <= int(m.group(1)) < 320, err
        assert not (trained / "plan_small").exists()
        # the user takes the smaller audit: it fits
        _params(trained, blackbox={"sequential_runs": int(m.group(1))}, budget_minutes=budget)
        assert _plan(trained, "plan_smaller") == 0
        assert read_sized_runs(trained / "plan_smaller")["mine"] == int(m.group(1))
    finally:
        (trained / "timings" / "stages.json").unlink()


def test_over_budget_stops_in_one_line_and_writes_nothing(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(trained)
    _params(trained, budget_minutes=0.1)
    assert _plan(trained, "plan_none") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("stage plan failed: the audit needs about") and "\n" not in err
    assert "compute.budget_minutes is 0.1" in err and "compute.budget_minutes=" in err
    assert not (trained / "plan_none").exists()


def test_the_canaries_stage_records_its_fits_and_the_next_plan_uses_them(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A single release fit can under-estimate a loop of fits (issue 35: 1.48 s against 2.14 s sustained); the
    canaries stage records the mean of its own fits and the next plan estimates from it, saying so."""
    monkeypatch.chdir(trained)
    _params(trained, blackbox={"sequential_runs": 8})
    assert _plan(trained, "plan_small_runs") == 0
    capsys.readouterr()
    assert run_stage("canaries", canaries_stage._args, canaries_stage._body,
                     argv=["--params", "params.yaml", "--features", "features", "--split", "split",
                           "--plan", "plan_small_runs", "--out", "canaries", "--shards", "shards",
                           "--timings", "timings/fits.json"]) == 0
    times = read_fit_times(trained / "timings" / "fits.json")
    # mine: 1 Game-3 run + 2 x 4 LiDP trials + 2 x 8 black-box runs, each a 0.3 s sleep and a fit
    assert times["mine"].audit_seconds is not None and 0.3 <= times["mine"].audit_seconds < 5.0
    assert times["logreg"].audit_seconds is not None  # a sequential built-in trainer is recorded too
    assert _plan(trained, "plan_after") == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("plan: mine (python)"))
    assert f"{times['mine'].audit_seconds:.3g} s per fit (audit fits)" in line
    assert read_json(trained / "timings" / "plan.json")["defenders"]["mine"]["timed_by"] == "audit fits"


def test_the_plan_prices_work_on_the_workers_at_the_slowdown_the_defenders_stage_measured(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The defenders stage times each trainer again on compute.n_jobs workers at once; the plan divides the
    canaries' fits on w workers by w / slowdown and says so, unless they are the canaries' own recorded fits."""
    import dataclasses

    from privaudit.planning.timings import record_fit_time

    monkeypatch.chdir(trained)
    _params(trained, n_jobs=2)
    fits = trained / "timings" / "fits.json"
    saved = fits.read_text()
    try:
        mine = read_fit_times(fits)["mine"]
        assert mine.slowdown_by == "one worker: no contention"  # the fixture's defenders ran with n_jobs: 1
        blackbox = {}
        for slowdown, by in ((1.0, ""), (1.5, "2 forked workers at once: 0.45 s a call against 0.3 s alone (1.50x)")):
            fits.unlink()  # record_fit_time keeps an audit fits' time of the same key (an earlier test's canaries)
            record_fit_time(dataclasses.replace(mine, audit_seconds=None, slowdown=slowdown, slowdown_workers=2,
                                                slowdown_by=by), fits)
            assert _plan(trained, f"plan-slowdown-{slowdown}") == 0
            blackbox[slowdown] = read_json(trained / "timings" / "plan.json")["defenders"]["mine"]["stages"][
                "canaries"]["pieces"]["blackbox"]
        assert blackbox[1.5] == pytest.approx(1.5 * blackbox[1.0])
        plain, slowed = [l for l in capsys.readouterr().out.splitlines() if l.startswith("plan: mine (python)")]
        assert "forked workers" not in plain and "2 forked workers at once: 0.45 s a call against 0.3 s alone (1.50x)" in slowed, slowed
        # the canaries' own fits ran on the workers: their contention is in them, not applied twice
        record_fit_time(dataclasses.replace(mine, audit_seconds=mine.model_seconds, slowdown=1.5,
                                            slowdown_workers=2, slowdown_by="measured"), fits)
        assert _plan(trained, "plan-slowdown-audit") == 0
        assert read_json(trained / "timings" / "plan.json")["defenders"]["mine"]["stages"]["canaries"]["pieces"][
            "blackbox"] == pytest.approx(blackbox[1.0])
    finally:
        fits.write_text(saved)


def test_before_any_audit_stage_ran_the_plan_takes_a_heavy_stages_start_up(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A first plan once put the plan stage's own start-up (light: no torch, no Great Expectations) as every audit
    stage's fixed cost and estimated one_run and whitebox at 0.16-0.20 of their wall: the defenders stage's measured
    start-up to its first fit is the prior now."""
    from privaudit.planning.timings import read_heavy_startup, record_heavy_startup

    monkeypatch.chdir(trained)
    _params(trained)
    assert not (trained / "timings" / "stages.json").exists()  # no audit stage has recorded its wall
    record_heavy_startup("defenders", 42.0, trained / "timings")
    assert read_heavy_startup(trained / "timings") == (42.0, "defenders")
    assert _plan(trained, "plan-heavy") == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("plan: stage one_run:"))
    assert "+ 42 s fixed: no run recorded yet: the defenders stage's start-up" in line, line
    (trained / "timings" / "startup.json").unlink()
    assert read_heavy_startup(trained / "timings") is None


def test_before_the_ltu_stage_ran_the_plan_times_its_scoring(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A first plan priced the LTU stage at its fits only (0.43-0.66 of its wall): its attackers' scoring and the
    per-sample risk are now timed on synthetic data of the audit's shapes and added to its fixed cost."""
    monkeypatch.chdir(trained)
    _params(trained)
    assert not (trained / "timings" / "stages.json").exists()  # the LTU stage has not recorded a wall
    assert _plan(trained, "plan-scoring") == 0
    line = _stage_line(capsys, "ltu")
    assert "its scoring, 2 x " in line and "s measured (synthetic " in line, line
    # the default attackers include the white-box one: its gradient pass timed per defender, with the features' d
    assert "not timed: gradient" not in line and "the gradient attacker's passes, " in line, line
    assert "s measured (random weights, 4 features)" in line, line
    assert read_json(trained / "timings" / "plan.json")["stages"]["ltu"]["fixed_seconds"] > 0


@pytest.mark.parametrize("stage, module, probe, said", [
    ("ltu", "privaudit.planning.ltu_scoring", "time_ltu_scoring", "its scoring"),
    ("one_run", "privaudit.audits.one_run_work", "time_one_run_work", "its bounds")])
def test_after_a_stage_ran_the_plan_uses_its_wall_and_times_nothing(
        stage: str, module: str, probe: str, said: str, trained: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Once the LTU (one-run) stage has a recorded wall, the plan takes its fixed cost from it and runs no probe."""
    import importlib

    from privaudit.planning.timings import record_stage_wall

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the plan ran {probe} although the {stage} stage has a recorded wall")

    monkeypatch.chdir(trained)
    _params(trained)
    assert _plan(trained, f"plan-before-{stage}") == 0  # the plan the stage's wall is recorded against
    capsys.readouterr()
    monkeypatch.setattr(importlib.import_module(module), probe, boom)
    record_stage_wall(stage, 1000.0, trained / "timings")
    try:
        assert _plan(trained, f"plan-recorded-{stage}") == 0
    finally:
        (trained / "timings" / "stages.json").unlink()
    line = _stage_line(capsys, stage)
    assert "its last run's wall minus its planned fits" in line and said not in line, line


def test_a_scoring_probe_that_cannot_run_leaves_the_plan_standing(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from privaudit.planning import ltu_scoring

    def refuses(*args: object, **kwargs: object) -> None:
        raise ValueError("none of ltu.attackers applies")

    monkeypatch.chdir(trained)
    _params(trained)
    monkeypatch.setattr(ltu_scoring, "time_ltu_scoring", refuses)
    assert _plan(trained, "plan-unscored") == 0
    line = _stage_line(capsys, "ltu")
    assert "its scoring not timed (none of ltu.attackers applies)" in line, line


def test_before_the_one_run_stage_ran_the_plan_times_its_bounds(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A first plan priced the one-run stage at its training runs only (1.3 s for a 3.5 s stage on the default
    audit): the bounds against each claim's curves are now timed on synthetic scores at the audit's number of
    canaries (``one_run.canaries: auto``, sized from the features' dimension) and added to its fixed cost."""
    from privaudit.audits import one_run_work

    seen: list[tuple[list[str], int]] = []
    real = one_run_work.time_one_run_work

    def spy(requests, canaries, seed=0):  # noqa: ANN001, ANN202
        seen.append(([r.name for r in requests], canaries))
        return real(requests, canaries, seed)

    monkeypatch.chdir(trained)
    _params(trained)
    monkeypatch.setattr(one_run_work, "time_one_run_work", spy)
    assert not (trained / "timings" / "stages.json").exists()
    assert _plan(trained, "plan-one-run") == 0
    line = _stage_line(capsys, "one_run")
    assert "its bounds, " in line and "s measured (bounds and detectable ε of 2 defenders on 100 synthetic" in line, line
    assert seen == [(["logreg", "mine"], 100)]  # 4 features x 3 classes: auto gives its floor of 100 canaries


def test_a_one_run_probe_without_the_features_leaves_the_plan_standing(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(trained)
    _params(trained)
    assert run_stage("plan", plan_stage._args, plan_stage._body,
                     argv=["--params", "params.yaml", "--defenders", "defenders", "--features", "nowhere",
                           "--timings", "timings/fits.json", "--out", "plan-no-features"]) == 0
    line = _stage_line(capsys, "one_run")
    assert "its bounds not timed (" in line and "nowhere" in line, line


def test_before_the_whitebox_stage_ran_the_plan_times_its_estimate(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A first plan priced the white-box stage at its watched runs and a stage's start-up (0.72 of its wall at
    10k x 128 in session 57): its estimate (the accountant over the pooled runs) is now timed on the release run the
    defenders stage recorded and added to its fixed cost; once the stage has a recorded wall, nothing is timed."""
    import shutil

    from privaudit.audits import whitebox_work
    from privaudit.planning.timings import record_stage_wall

    root = tmp_path / "dp"
    shutil.copytree(trained, root, ignore=shutil.ignore_patterns("timings", "defenders", "plan*"))
    params = yaml.safe_load((trained / "params.yaml").read_text())
    params["defenders"] = [{"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "delta": 1e-5, "epochs": 2,
                            "batch_size": 20, "lr": 0.5, "max_grad_norm": 1.0}]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(root)
    assert run_stage("defenders", defenders_stage._args, defenders_stage._body,
                     argv=["--params", "params.yaml", "--features", "features", "--split", "split", "--out",
                           "defenders", "--timings", "timings/fits.json"]) == 0
    capsys.readouterr()
    assert _plan(root, "plan-whitebox") == 0
    line = _stage_line(capsys, "whitebox")
    assert "its estimate, " in line and "s measured (the estimate of 1 defender on 3 copies of its recorded release " \
        "run)" in line, line
    assert read_json(root / "timings" / "plan.json")["stages"]["whitebox"]["fixed_seconds"] > 0

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the plan timed the white-box estimate although the stage has a recorded wall")

    monkeypatch.setattr(whitebox_work, "time_whitebox_work", boom)
    record_stage_wall("whitebox", 1000.0, root / "timings")
    assert _plan(root, "plan-whitebox-recorded") == 0
    line = _stage_line(capsys, "whitebox")
    assert "its last run's wall minus its planned fits" in line and "its estimate" not in line, line
