"""``benchmarks/bench_scale.py``: its CSV is one the csv source reads, its report names a cut-off stage,
and (slow) a small run records every stage it ran with wall, CPU, peak RSS and the output digests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_scale
from privaudit.data.sources.csv_table import load_csv
from tests.pipeline.conftest import pipeline_env

ROOT = Path(__file__).resolve().parents[2]


def test_the_synthetic_csv_is_a_valid_source(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    bench_scale.write_csv(path, n=300, d=5, k=3, seed=1, sep=6.0)
    src = load_csv(path, "label")
    assert src.X.shape == (300, 5) and src.X.dtype == np.float32 and set(np.unique(src.y)) == {0, 1, 2}
    again = tmp_path / "again.csv"
    bench_scale.write_csv(again, n=300, d=5, k=3, seed=1, sep=6.0)
    assert again.read_bytes() == path.read_bytes()  # seeded


def test_a_cut_off_run_names_the_stage_it_stopped_in() -> None:
    stages = [{"stage": "ltu", "wall_s": 12.0, "user_s": 10.0, "sys_s": 1.0, "max_rss_mib": 700.0, "rc": 0,
               "gpu_peak_mib": 512.0},
              {"stage": "canaries", "start": 0.0, "cut_off_after_s": 42.0}]
    text = bench_scale.render({
        "size": {"n": 10, "d": 2, "k": 2, "seed": 0, "sep": 6.0}, "dataset": {"name": "csv"}, "target": None,
        "device": "cuda", "device_name": "GPU", "cores": 16, "host": "h", "load_before": (0, 0, 0),
        "load_after": (1, 1, 1), "repo": "r", "overrides": [], "dvc_rc": -15, "cut_off": True, "timeout_s": 60,
        "total_wall_s": 61.0, "stages": stages, "fits_per_stage": {"ltu": 40}, "plan_seconds_per_stage": {"ltu": 9.0},
        "plan_estimated_seconds": 100.0, "digests": {}, "profile_top25_cumulative": None, "profile_stage": None,
        "repro_tail": ["canaries: 3 of 40 trials"]})
    assert "CUT OFF by --timeout 60 s" in text and "cut off after 42 s" in text
    ltu = next(line for line in text.splitlines() if line.startswith("ltu"))
    assert ltu.split()[:5] == ["ltu", "12.0", "11.0", "40", "9"] and "512" in ltu
    assert "canaries: 3 of 40 trials" in text


@pytest.mark.slow
def test_a_small_run_records_every_stage(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "benchmarks/bench_scale.py", "--n", "400", "--d", "4", "--k", "3",
                           "--target", "featurize", "--profile", "split", "--out-dir", str(tmp_path)],
                          cwd=ROOT, env=pipeline_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "scale_400x4_cpu.json").read_text())
    ran = {s["stage"]: s for s in result["stages"]}
    assert {"ingest", "split", "featurize"} <= set(ran)
    assert all(s["rc"] == 0 and s["wall_s"] > 0 and s["max_rss_mib"] > 0 for s in ran.values())
    assert ran["split"]["profiled"] and "cumtime" in result["profile_top25_cumulative"]
    assert "data/features" in result["digests"]


def test_the_plan_column_is_the_stages_estimate_with_its_fixed_cost() -> None:
    """Until 2026-11-28 the column summed the planned fits only (a stage's fixed cost, e.g. the LTU scoring, was
    missing from it); the fits' part has its own column."""
    plan = {"stages": {"ltu": {"seconds": 14.0, "fits_seconds": 9.0, "fixed_seconds": 5.0}},
            "defenders": {"a": {"stages": {"ltu": {"seconds": 6.0, "fits": 30}}},
                          "b": {"stages": {"ltu": {"seconds": 3.0, "fits": 10}, "canaries": {"seconds": 2.0}}}}}
    assert bench_scale.plan_seconds_per_stage(plan) == {"ltu": 14.0, "canaries": 2.0}
    assert bench_scale.plan_fit_seconds_per_stage(plan) == {"ltu": 9.0, "canaries": 2.0}
    stages = [{"stage": "ltu", "wall_s": 15.0, "user_s": 1.0, "sys_s": 0.0, "max_rss_mib": 10.0, "rc": 0}]
    text = bench_scale.render({
        "size": None, "dataset": {"name": "digits"}, "target": None, "device": "cpu", "device_name": "cpu",
        "cores": 2, "host": "h", "load_before": (0, 0, 0), "load_after": (0, 0, 0), "repo": "r", "overrides": [],
        "dvc_rc": 0, "cut_off": False, "timeout_s": None, "total_wall_s": 20.0, "stages": stages,
        "fits_per_stage": {"ltu": 40}, "plan_seconds_per_stage": {"ltu": 9.0}, "plan": plan,
        "plan_estimated_seconds": 16.0, "digests": {}, "profile_top25_cumulative": None, "profile_stage": None,
        "repro_tail": []})
    ltu = next(line for line in text.splitlines() if line.startswith("ltu"))
    assert ltu.split()[:6] == ["ltu", "15.0", "1.0", "40", "14", "9"], ltu


def test_a_profile_cut_off_while_being_written_is_reported_not_raised(tmp_path: Path) -> None:
    import cProfile

    whole = tmp_path / "profile_whole.out"
    prof = cProfile.Profile()
    prof.runcall(sorted, range(1000))
    prof.dump_stats(str(whole))
    assert "ncalls" in bench_scale.top_profile(whole)
    for size in (0, whole.stat().st_size // 2):  # empty, and half written (the fifth H200 lease lost its results so)
        cut = tmp_path / f"profile_cut_{size}.out"
        cut.write_bytes(whole.read_bytes()[:size])
        text = bench_scale.top_profile(cut)
        assert text.startswith("profile unreadable") and cut.name in text and f"{size} bytes" in text


def test_eta_lines_are_scored_against_the_time_their_work_still_took() -> None:
    """Issue 43's ETA criterion, measured from outside: each ETA line against the seconds until its progress's last
    line, with the ETA's one-second resolution; lines before any ETA are not scored, ``ETA --`` after a tenth of the
    units is counted; other stages' progress and other lines are kept apart."""
    def rec(stage: str, t: float, line: str) -> dict:
        return {"stage": stage, "t": t, "line": line}

    lines = [rec("canaries", 0.0, "canaries: dp blackbox 0-1000 done; 1000 of 4000 trials, 30.9 trials/s, ETA --"),
             rec("canaries", 40.0, "canaries: dp blackbox 1000-2000 done; 2000 of 4000 trials, 50 trials/s, ETA 1:00"),
             rec("ltu", 41.0, "logreg: reference models: model 8 done; 8 of 16 fits, 32.4 fits/s, ETA 0:03"),
             rec("canaries", 50.0, "plan: something else"),
             rec("canaries", 70.0, "canaries: mlp game3 0-1 done; 4000 of 4000 trials, 45 trials/s, ETA 0:00"),
             rec("ltu", 42.0, "logreg: reference models: model 16 done; 16 of 16 fits, 38.1 fits/s, ETA 0:00")]
    out = {a["progress"]: a for a in bench_scale.eta_accuracy(lines)}
    assert set(out) == {"canaries: canaries", "ltu: logreg: reference models"}
    can = out["canaries: canaries"]
    assert (can["lines"], can["eta_lines"], can["dashes_after_tenth"], can["finished"]) == (3, 2, 1, True)
    assert can["max_off"] == round(61 / 31, 2) and can["worst"] == {"shown_s": 60.0, "actual_s": 30.0, "at_s": 40.0}
    ltu = out["ltu: logreg: reference models"]
    assert ltu["max_off"] == 2.0 and ltu["eta_lines"] == 2  # 3 s shown, 1 s taken: (3 + 1) / (1 + 1)
    assert bench_scale._clock_seconds("1:02:03") == 3723.0
    text = bench_scale.render({
        "size": None, "dataset": {"name": "digits"}, "target": None, "device": "cpu", "device_name": "cpu",
        "cores": 2, "host": "h", "load_before": (0, 0, 0), "load_after": (0, 0, 0), "repo": "r", "overrides": [],
        "dvc_rc": 0, "cut_off": False, "timeout_s": None, "total_wall_s": 20.0, "stages": [],
        "fits_per_stage": {}, "plan_seconds_per_stage": {}, "plan": None, "plan_estimated_seconds": None,
        "digests": {}, "profile_top25_cumulative": None, "profile_stage": None, "repro_tail": [],
        "eta_accuracy": list(out.values())})
    assert "canaries: canaries: 3 lines over 70 s, 2 with an ETA, worst 1.97x (ETA 60 s shown 40 s in, 30 s taken)" in text


def test_the_stage_wrapper_keeps_each_output_line_with_its_time(tmp_path: Path) -> None:
    """The wrapper bench_scale puts around every stage command passes its stdout through and records each line."""
    (tmp_path / ".bench").mkdir()
    (tmp_path / "wrap.py").write_text(bench_scale.WRAPPER)
    script = "import time; print('a: 1 of 2 fits, 1 fits/s, ETA --', flush=True); time.sleep(0.3); print('done')"
    proc = subprocess.run([sys.executable, "wrap.py", "st", ".bench/stages.jsonl", "-", sys.executable, "-c", script],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["a: 1 of 2 fits, 1 fits/s, ETA --", "done"]
    recs = bench_scale.read_lines(tmp_path / ".bench" / "lines.jsonl")
    assert [(r["stage"], r["line"]) for r in recs] == [("st", "a: 1 of 2 fits, 1 fits/s, ETA --"), ("st", "done")]
    assert recs[1]["t"] - recs[0]["t"] >= 0.25
    events = [json.loads(x) for x in (tmp_path / ".bench" / "stages.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "end"] and events[1]["rc"] == 0
