"""Local worker processes for sequential fits: forked from the stage's process where that is safe, else loky's.

A stage spreads independent fits (canary shards, LTU reference models and retrain mocks) over ``compute.n_jobs``
processes with :func:`map_in_processes`. joblib's default (loky) starts each worker as a fresh interpreter that
imports numpy, torch, scikit-learn and privaudit again: 7.4-8.7 s for two workers on 2 shared cores
(``benchmarks/bench_worker_pool.py``, ``benchmarks/results/worker_pool_cpu.txt``), paid by every stage that uses
them, on a warm stage server too. A worker forked from the stage's process has all of that already: 0.17-0.27 s.

Forking is safe only when no other thread of this process can hold a lock the child would inherit and when the
child cannot inherit a live CUDA context. :func:`fork_refusal` says why not; then (or with
``PRIVAUDIT_FORK_WORKERS=0``, or off Linux) the workers are loky's, exactly as ``joblib.Parallel`` starts them.
Either way a worker limits BLAS/OpenMP and torch to the threads joblib gives a loky worker (``cores // n_jobs``
unless the variable is set; the fit functions pin one thread themselves), so a fit is the same bits in a forked
worker, a loky worker and, where it pins one thread, the stage's own process (tested in
``tests/unit/test_worker_pool.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

__all__ = ["FORK_ENV", "fork_refusal", "map_in_processes", "pool_startup_seconds", "worker_threads"]

#: ``0`` keeps every worker pool loky's (fresh interpreters), whatever :func:`fork_refusal` says
FORK_ENV = "PRIVAUDIT_FORK_WORKERS"

#: what a pool of two workers took from its start to its last result (one quick fit each) in a process that had
#: imported torch, scikit-learn and privaudit, on 2 shared AMD EPYC cores (2026-11-28,
#: ``benchmarks/results/worker_pool_cpu.txt``): loky's fresh interpreters 7.4-8.7 s, forks 0.17-0.27 s. The plan
#: (:mod:`privaudit.planning.cost`) and the rule for when workers pay
#: (:func:`privaudit.defenders.fit_workers.workers_pay`) use them.
LOKY_STARTUP_S = 8.0
FORK_STARTUP_S = 0.2

# the thread-count variables joblib sets for a loky worker (joblib/_parallel_backends.py), and the threadpoolctl
# internal API each governs in a library already loaded
_THREAD_VARS = {"OMP_NUM_THREADS": "openmp", "OPENBLAS_NUM_THREADS": "openblas", "MKL_NUM_THREADS": "mkl",
                "BLIS_NUM_THREADS": "blis", "VECLIB_MAXIMUM_THREADS": None, "NUMBA_NUM_THREADS": None,
                "NUMEXPR_NUM_THREADS": None}


def fork_refusal(device: str = "cpu") -> str | None:
    """Why workers cannot be forked from this process now (``None``: they can); ``device``: where the workers' fits
    run (a user's ``kind: python`` trainer gets it).

    Refused: off Linux (macOS's system libraries are not fork-safe), with ``PRIVAUDIT_FORK_WORKERS=0``, in a
    thread other than the main one or while another Python thread runs (it may hold a lock — logging, a stream's
    buffer — that the child would inherit locked: a Prefect task runner, a progress monitor), once torch has
    initialised CUDA here (a child cannot use the parent's context), and, for workers on a CUDA ``device``, once
    anything here has initialised the CUDA driver (``torch.cuda.is_available()`` does, without torch counting CUDA
    as initialised: :mod:`privaudit.repro.cuda_state`); workers on the CPU do not touch the GPU, so that alone does
    not stop them. BLAS and OpenMP pools are no reason: OpenBLAS re-initialises itself after a fork, and a worker
    runs its fits on one OpenMP thread."""
    if os.environ.get(FORK_ENV, "1").strip() == "0":
        return f"{FORK_ENV}=0"
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return f"platform {sys.platform}: fork is not safe there"
    if threading.current_thread() is not threading.main_thread():
        return f"called from thread {threading.current_thread().name!r}, not the main thread"
    if threading.active_count() > 1:
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        return f"{len(names)} other thread(s) running ({', '.join(names[:3])})"
    from privaudit.repro.cuda_state import cuda_driver_initialised, torch_cuda_initialised

    if torch_cuda_initialised():
        return "this process has initialised CUDA"
    if str(device).startswith("cuda") and cuda_driver_initialised():
        return ("this process has initialised the CUDA driver (torch.cuda.is_available() does), and workers on "
                f"{device} could not use the GPU")
    return None


def pool_startup_seconds(device: str = "cpu") -> float:
    """The start-up a worker pool is expected to cost on ``device`` (seconds, :data:`FORK_STARTUP_S` or
    :data:`LOKY_STARTUP_S`): on a CUDA device the stage's process has initialised CUDA before its fits, so its
    workers are loky's; on the CPU they are forked where :func:`fork_refusal` allows it here."""
    if str(device).startswith("cuda"):
        return LOKY_STARTUP_S
    return FORK_STARTUP_S if fork_refusal() is None else LOKY_STARTUP_S


def worker_threads(n_jobs: int) -> dict[str, str]:
    """The thread-count environment joblib gives a loky worker of a pool of ``n_jobs``: each variable's value in this
    process's environment when it is set, else ``cores // n_jobs`` (at least 1)."""
    from joblib import cpu_count

    default = str(max(cpu_count() // max(n_jobs, 1), 1))
    return {var: os.environ.get(var, default) for var in _THREAD_VARS}


def map_in_processes(fn: Callable[..., Any], items: Iterable[Sequence[Any]], n_jobs: int, *,
                     shared: Sequence[Any] = (), ordered: bool = True, fork_only: bool = False,
                     device: str = "cpu") -> Iterator[Any]:
    """``fn(*shared, *item)`` for each item on ``n_jobs`` worker processes (joblib's meaning: -1 is every core);
    the results in the items' order (``ordered``) or as they finish.

    Forked workers (:func:`fork_refusal` is ``None``) inherit ``shared`` (large arrays, a feature set) instead of
    receiving a pickled copy with each item; loky workers get it with each call, as ``joblib.Parallel`` sends it.
    ``fork_only``: where a fork is refused, run the items in this process instead of on loky's workers (for work
    of a few seconds, which loky's start-up would not repay).
    Leaving the iterator early (an exception, ``break``) cancels the items not yet started and waits for the
    running ones. ``fn`` must be importable by name (a module-level function), as joblib requires. ``device``:
    where ``fn``'s work runs (:func:`fork_refusal`).
    """
    from joblib import effective_n_jobs

    items = [tuple(item) for item in items]
    jobs = min(effective_n_jobs(n_jobs), len(items))
    refusal = fork_refusal(device) if jobs > 1 else None
    if jobs <= 1 or (fork_only and refusal is not None):
        yield from (fn(*shared, *item) for item in items)
        return
    if refusal is not None:
        from joblib import Parallel, delayed

        yield from Parallel(n_jobs=jobs, return_as="generator" if ordered else "generator_unordered")(
            delayed(fn)(*shared, *item) for item in items)
        return
    yield from _forked(fn, items, jobs, tuple(shared), ordered)


# the forked worker's function and shared arguments: set once per worker by _init_forked (inherited, not pickled)
_FN: Callable[..., Any] | None = None
_SHARED: tuple[Any, ...] = ()


def _init_forked(fn: Callable[..., Any], shared: tuple[Any, ...], env: dict[str, str]) -> None:
    """A forked worker's start: remember ``fn`` and ``shared``; limit its thread pools as a loky worker's are (the
    variables for libraries it loads later, the pools of those already loaded, torch's intra-op threads)."""
    global _FN, _SHARED
    _FN, _SHARED = fn, shared
    os.environ.update(env)
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    for var, api in _THREAD_VARS.items():
        if api is not None and env[var].isdigit():
            controller.select(internal_api=api).limit(limits=int(env[var]))  # applies now, for the worker's life
    torch = sys.modules.get("torch")
    if torch is not None and env["OMP_NUM_THREADS"].isdigit():
        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))


def _call_forked(item: tuple[Any, ...]) -> Any:
    if _FN is None:  # pragma: no cover - the initializer always ran first
        raise RuntimeError("worker_pool: a forked worker ran a call before its initializer")
    return _FN(*_SHARED, *item)


def _forked(fn: Callable[..., Any], items: list[tuple[Any, ...]], jobs: int, shared: tuple[Any, ...],
            ordered: bool) -> Iterator[Any]:
    """:func:`map_in_processes` on forked workers (every worker is forked at the first submit, before the
    executor starts its own thread)."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"),
                               initializer=_init_forked, initargs=(fn, shared, worker_threads(jobs)))
    finished = False
    try:
        futures = [pool.submit(_call_forked, item) for item in items]
        if ordered:
            for fut in futures:
                yield fut.result()
        else:
            pending: set[Future[Any]] = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=futures.index):  # the items' order among those that ended together
                    yield fut.result()
        finished = True
    finally:
        pool.shutdown(wait=True, cancel_futures=not finished)
