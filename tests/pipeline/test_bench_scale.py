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
