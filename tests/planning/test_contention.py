"""Issue 43: the plan priced work on compute.n_jobs workers as if each ran as fast as alone (the 10k canaries stage
ran 0.71-0.77 of its first plan on 2 cores; two DP-SGD calls at once each took 1.17-1.20x). The contention probe
(privaudit.planning.fit_probe.concurrent_slowdown) times a call on that many forked workers started together."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from privaudit.planning import fit_probe
from privaudit.repro.worker_pool import FORK_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux only")

HOLD_S = 0.2


def _one_at_a_time(lock: Path):  # type: ignore[no-untyped-def]
    """A call that holds an exclusive lock for HOLD_S: on w workers at once they queue, the i-th waits i × HOLD_S."""
    def call() -> None:
        with lock.open("w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            time.sleep(HOLD_S)
    return call


def _in_fresh_process(check: str, *args: str) -> None:
    """Run ``check`` (a function of this module) in a fresh one-thread process. A pytest-xdist worker may still hold
    threads another test left behind (a Dask cluster's, tqdm's monitor), and a process with other threads refuses to
    fork (rightly, ``privaudit.repro.worker_pool.fork_refusal``): the probe would then measure nothing, and these
    checks failed — or, for the idle one, passed without measuring — depending on which tests ran before."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    env.pop(FORK_ENV, None)
    code = f"import sys; from tests.planning import test_contention as t; t.{check}(*sys.argv[1:])"
    res = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


def _check_shared_resource(lock_dir: str) -> None:
    fit_probe.REPEATS = 1  # one call per worker (repeated calls interleave); this process only
    call = _one_at_a_time(Path(lock_dir) / "lock")
    two, how = fit_probe.concurrent_slowdown(call, HOLD_S, 2)
    assert 1.35 <= two <= 1.8, how
    assert "2 forked workers at once" in how
    three, _ = fit_probe.concurrent_slowdown(call, HOLD_S, 3)
    assert 1.8 <= three <= 2.4 and three > two


def test_workers_that_share_a_resource_are_measured_slower_than_one_alone(tmp_path: Path) -> None:
    """Two workers that queue for one lock, one call each: 0.2 and 0.4 s (mean 1.5x alone); three: 2x."""
    _in_fresh_process("_check_shared_resource", str(tmp_path))


def _check_idle() -> None:
    slow, how = fit_probe.concurrent_slowdown(lambda: time.sleep(HOLD_S), HOLD_S, 2)
    assert "2 forked workers at once" in how, how  # measured, not skipped
    assert 1.0 <= slow < 1.25, how  # sleeping calls share nothing (scheduling noise only)


def test_independent_calls_on_idle_workers_are_not_slowed_much() -> None:
    _in_fresh_process("_check_idle")


def test_one_worker_or_no_fork_measures_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise AssertionError("the probe ran a call it had no reason to run")

    assert fit_probe.concurrent_slowdown(boom, 1.0, 1) == (1.0, "one worker: no contention")
    monkeypatch.setenv(FORK_ENV, "0")
    slow, how = fit_probe.concurrent_slowdown(boom, 1.0, 2)
    assert slow == 1.0 and how.startswith("not measured: workers cannot be forked here") and FORK_ENV in how


def _check_trainer_probe() -> None:
    from privaudit.defenders.specs import LogRegSpec

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    spec = LogRegSpec(name="lr", kind="logistic_regression")
    alone = fit_probe.measure_fit_rate(spec, X, y, 2, "cpu", 0)
    assert (alone.slowdown, alone.workers, alone.slowdown_by) == (1.0, 1, "one worker: no contention")
    pooled = fit_probe.measure_fit_rate(spec, X, y, 2, "cpu", 0, workers=2)
    assert pooled.slowdown >= 1.0 and pooled.workers == 2 and "2 forked workers at once" in pooled.slowdown_by


def test_the_probe_of_a_trainer_reports_its_slowdown_on_the_audits_workers() -> None:
    """measure_fit_rate times the large call (a sequential trainer's fit) again on ``workers`` workers."""
    _in_fresh_process("_check_trainer_probe")
