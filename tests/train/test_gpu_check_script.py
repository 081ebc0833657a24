"""``benchmarks/gpu_check.sh``, the GPU checks of issue 17 in one command (kept out of
``test_devices.py``, which the script itself runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def test_gpu_check_script_dry_run_on_the_cpu() -> None:
    """``benchmarks/gpu_check.sh`` (the GPU checks in one command) runs its test step with DEVICE=cpu
    — the cpu cases pass, the cuda ones are reported as skipped — and refuses an unknown step."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DEVICE": "cpu"}
    res = subprocess.run(["bash", "benchmarks/gpu_check.sh", "tests"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "passed" in res.stdout and "no CUDA device on this machine" in res.stdout
    bad = subprocess.run(["bash", "benchmarks/gpu_check.sh", "benchmark"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "unknown step benchmark" in bad.stderr


def test_gpu_lease_refuses_a_bad_step_before_running_anything(tmp_path: Path) -> None:
    """``benchmarks/gpu_lease.sh`` (a lease's steps under time limits, packed into one file) checks every
    argument before it installs or runs anything: a lease's minutes are not spent on a typo."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DEVICE": "cpu", "WHEELS": "0", "OUT": str(tmp_path / "out")}
    res = subprocess.run(["bash", "benchmarks/gpu_lease.sh", "sgd:60", "default", "scale"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "'default' is not STEP:SECONDS" in res.stderr
    assert not (tmp_path / "out").exists()


def test_gpu_check_wbruns_step_runs_its_dry_run(tmp_path: Path) -> None:
    """``gpu_check.sh wbruns`` (the white-box audit's runs on one GPU in one process or in forked workers) runs
    ``bench_whitebox_runs_device.py --dry-run`` without a GPU: both rows give the same estimate."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DEVICE": "cpu", "PYTHONPATH": f"{root / 'src'}:{root}"}
    res = subprocess.run(["bash", "benchmarks/gpu_check.sh", "wbruns"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    row = [line for line in res.stdout.splitlines() if line.startswith("runs=2:")]
    assert row and "same estimate: True" in row[0], res.stdout
