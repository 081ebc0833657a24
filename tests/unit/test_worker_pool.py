"""privaudit.repro.worker_pool: forked workers where safe (the same bits as in-process and loky fits), else loky's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from privaudit.repro import worker_pool as wp
from privaudit.defenders.fit_workers import WORKER_STARTUP_S

ROOT = Path(__file__).resolve().parents[2]


def _square(shared: int, x: int) -> int:
    return shared + x * x


@pytest.fixture(scope="module")
def probe() -> dict:  # type: ignore[type-arg]
    """tests/worker_pool_probe.py in a fresh one-thread process (pytest-xdist's workers run threads: no forks here)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env.pop(wp.FORK_ENV, None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env.pop(var, None)
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "worker_pool_probe.py")], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are used on Linux only")
def test_forked_workers_run_where_safe_and_give_the_in_process_bits(probe) -> None:  # type: ignore[no-untyped-def]
    assert probe["refusal"] is None and probe["refusal_after_imports"] is None
    assert probe["refusal_after_gx"] is None  # stages turn tqdm's monitor thread off: GX's bars leave no thread
    # shared state reaches forked workers without pickling (Unpicklable raises on pickle)
    assert probe["fork_add"] == [0.5 + i for i in range(8)]
    assert probe["fork_unordered"] == [1.0 + i for i in range(8)]
    # an exception in a worker reaches the caller with its type and message
    assert probe["fork_error"] == "planted failure at item 2"
    # a scikit-learn fit through the LTU's own fit function: the same bits forked as in the stage's process (the
    # loky path is compared with the in-process one by the suite's n_jobs tests, which run loky under xdist)
    assert probe["fork_logreg"] == probe["in_process_logreg"]
    assert probe["threads_after"] == 1  # the pool's threads are gone when the map ends
    # every worker limits its pools as joblib limits a loky worker's (cores // n_jobs here)
    expected = int(probe["expected_threads"]["OMP_NUM_THREADS"])
    for worker in probe["fork_threads"]:
        assert worker["torch"] == expected
        assert all(n == expected for api, n in worker["pools"] if api in ("openmp", "openblas", "mkl", "blis"))
    assert probe["figures_same"]  # the report's figures: the same PNG bytes drawn on forked workers
    assert "probe-side-thread" in probe["refusal_with_thread"]
    assert probe["refusal_env"] == f"{wp.FORK_ENV}=0"


def test_refusals_name_their_reason(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(wp.FORK_ENV, "0")
    assert wp.fork_refusal() == f"{wp.FORK_ENV}=0"
    monkeypatch.delenv(wp.FORK_ENV)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "darwin" in (wp.fork_refusal() or "")
    monkeypatch.undo()
    stop = threading.Event()
    side = threading.Thread(target=stop.wait, name="side-thread-of-this-test")
    side.start()
    try:
        refusal = wp.fork_refusal()
        assert refusal is not None and "other thread(s) running" in refusal
    finally:
        stop.set()
        side.join()
    result: list[str | None] = []
    side = threading.Thread(target=lambda: result.append(wp.fork_refusal()), name="caller")
    side.start()
    side.join()
    assert result[0] is not None and "'caller'" in result[0] and "not the main thread" in result[0]


def test_one_job_or_one_item_runs_in_this_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def no_pool(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("no worker pool for one job or one item")

    monkeypatch.setattr(wp, "_forked", no_pool)
    monkeypatch.setattr("joblib.Parallel", no_pool)
    assert list(wp.map_in_processes(_square, [(i,) for i in range(4)], 1, shared=(1,))) == [1, 2, 5, 10]
    assert list(wp.map_in_processes(_square, [(3,)], 4, shared=(0,))) == [9]
    assert list(wp.map_in_processes(_square, [], 4, shared=(0,))) == []


def test_fork_only_work_stays_here_when_a_fork_is_refused(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def no_pool(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("fork_only: no loky pool where a fork is refused")

    monkeypatch.setenv(wp.FORK_ENV, "0")
    monkeypatch.setattr("joblib.Parallel", no_pool)
    assert list(wp.map_in_processes(_square, [(i,) for i in range(3)], 2, shared=(0,), fork_only=True)) == [0, 1, 4]


def test_loky_fallback_gives_the_same_results_in_order(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(wp.FORK_ENV, "0")
    items = [(i,) for i in range(5)]
    assert list(wp.map_in_processes(_square, items, 2, shared=(10,))) == [10 + i * i for i in range(5)]
    assert sorted(wp.map_in_processes(_square, items, 2, shared=(10,), ordered=False)) == [10 + i * i for i in range(5)]


def test_worker_threads_follow_joblibs_rule(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from joblib import cpu_count

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert wp.worker_threads(1)["OMP_NUM_THREADS"] == str(cpu_count())
    assert wp.worker_threads(10 * cpu_count())["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    threads = wp.worker_threads(2)
    assert threads["OPENBLAS_NUM_THREADS"] == "3" and threads["OMP_NUM_THREADS"] == str(max(cpu_count() // 2, 1))
    # the joblib source this mirrors: a loky worker's environment for the same pool
    from joblib._parallel_backends import LokyBackend

    loky_env = LokyBackend()._prepare_worker_env(2)
    assert {var: loky_env[var] for var in threads} == threads


def test_pool_startup_follows_the_pool_kind(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert wp.pool_startup_seconds("cuda") == wp.pool_startup_seconds("cuda:1") == wp.LOKY_STARTUP_S
    monkeypatch.setenv(wp.FORK_ENV, "0")
    assert wp.pool_startup_seconds("cpu") == wp.LOKY_STARTUP_S == WORKER_STARTUP_S
    monkeypatch.setattr(wp, "fork_refusal", lambda: None)
    assert wp.pool_startup_seconds("cpu") == wp.FORK_STARTUP_S < wp.LOKY_STARTUP_S
    assert np.isfinite(wp.FORK_STARTUP_S)
