"""Measure what a call of a defender's trainer costs on this machine, one-off costs apart (for the plan).

* A sequential trainer (sklearn kinds, ``kind: python``, PATE): its release fit (timed by the defenders
  stage) is the warm-up — imports, a first call's caches, an accountant computing σ (a user trainer took
  6.2 s on its first fit against 0.017 s per later fit) — then :data:`REPEATS` fits on the Defender set, on
  one BLAS/OpenMP thread as every audit fit runs (a digits logistic regression: 0.04-0.07 s on one thread,
  0.67-0.82 s on the 2 cores' default threads); the median is the seconds per fit.
* A batched trainer (``torch_mlp``, ``dp_sgd``: :func:`privaudit.train.train_heads`): one warm-up call of
  :data:`SMALL` models, then :data:`REPEATS` calls of :data:`SMALL` and of :data:`LARGE` models on the
  Defender set; from the two medians the per-model slope and the per-call intercept, so that a block of a
  thousand models is planned as ``call + 1000 × slope``, not as a thousand release fits. A long recipe is
  timed on a truncated run (:func:`truncated_lengths`): its cost is linear in its length (a DP-SGD step, an
  SGD epoch: the same work at any index), so three lengths-by-sizes — (SMALL, k), (LARGE, k), (SMALL, 4k) —
  give a per-call, a per-step and a per-model-step cost (:func:`rate_from_truncated`) and the full length is
  planned from them. The per-step cost is the two small calls' difference over their lengths, multiplied by the
  full length (30 epochs: by 30); :data:`LONG_FACTOR` k rather than 2k divides an additive timing error in it by
  three and a proportional one (a loaded host) by 1.6 (``benchmarks/bench_probe_lengths.py``). On CUDA the large
  call is timed at two lengths too (:func:`large_call_twice`), as a call's first epoch or steps there take another
  path than the rest. Timing seven whole calls cost seven release fits: at 50 000 × 512 on an H200 the DP-SGD head's
  7 820 launch-bound steps made the defenders stage's probe run for minutes.
  The large call has as many models as the canaries stage's largest call of that defender (a black-box
  block, :func:`probe_block`; up to 1 000): at 5 000 × 128 a 1000-model block's per-model step cost was 1.55×
  the slope of calls of 2 and 32 models (its (M, P) buffers leave the cache), and the 10k canaries were
  planned at 85 s for 131 s. On the CPU it runs fewer steps (:func:`large_call_length`: 8 for 1000 models)
  so that it costs about four 32-model calls; the model above takes its f from the small calls.
* Contention (:func:`concurrent_slowdown`): the canaries stage's shards and the LTU stage's fits run on
  ``compute.n_jobs`` forked workers at once, each slower than alone (shared caches and memory bandwidth, a
  host's other tenants): on the 2 AMD EPYC cores here a 10k x 128 DP-SGD call of 1 000 models took 1.17-1.20x
  and an MLP call of 64 models 1.13x its time alone, and the 10k canaries stage ran 0.71-0.77 of the first
  plan's estimate, which divided the fits by the worker count. The large call (a sequential trainer's fit) is
  timed again on that many forked workers started together, and the plan divides work on w workers by
  ``w / slowdown``.

The fits here use their own seeds and leave every result untouched; they run only to be timed.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, replace
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FitProbe", "LARGE", "LONG_FACTOR", "MAX_PROBE_BLOCK", "MIN_LARGE_STEPS", "PROBE_DP_STEPS", "PROBE_EPOCHS",
           "PROBE_EPOCHS_GRAPHS", "REPEATS", "SMALL", "concurrent_slowdown", "large_call_length", "large_call_twice",
           "measure_fit_rate", "probe_block", "probe_length", "rate_from_blocks", "rate_from_truncated",
           "truncated_lengths"]

#: timed repetitions of each measurement (the median is kept)
REPEATS = 3
#: models per call of the batched trainer's two measured block sizes: far enough apart that the per-model cost
#: stands out of the timing noise (with 2 and 8 models, calls on digits differed by less than their noise and
#: the slope came out as 0 on a loaded machine: a black-box audit of 2 000 models planned at 0.3 s)
SMALL, LARGE = 2, 32
#: DP-SGD steps of a truncated timed call: at least two CUDA graphs' worth
#: (``2 × privaudit.train.static_steps.STEPS_PER_GRAPH``), so that a truncated call on CUDA takes the same
#: path (captured static steps) as the full one
PROBE_DP_STEPS = 64
#: SGD epochs of a truncated timed call
PROBE_EPOCHS = 1
#: the second small truncated call runs this many times the first's length: the per-step cost comes from their
#: difference and is multiplied by the full length (30 epochs: x 30); against 2k an additive timing error in it is
#: divided by ``LONG_FACTOR - 1``, a proportional one by 1.6 (the whole recipe is timed when it is shorter than this
#: many probe lengths)
LONG_FACTOR = 4
#: SGD epochs of a truncated timed call on CUDA: two, so that the truncated calls take the full call's path
#: (epochs in CUDA graphs from two epochs, ``privaudit.train.cuda_graphs``): a call of u >= 1 epochs then costs
#: a first epoch (eager block, captures) plus (u - 1) replayed epochs, linear in u, and 2 and ``LONG_FACTOR`` x 2
#: epochs give the replayed epoch's cost; 1 and 2 epochs would take it from an eager epoch and a captured one
PROBE_EPOCHS_GRAPHS = 2


def _median_seconds(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))


def rate_from_blocks(small: float, large: float, n_small: int = SMALL, n_large: int = LARGE) -> tuple[float, float]:
    """(per-call, per-model) seconds from the median times of calls of ``n_small`` and ``n_large`` models.

    >>> rate_from_blocks(1.0, 1.6, n_small=2, n_large=8)
    (0.8, 0.1)
    >>> rate_from_blocks(1.0, 0.9)  # noise: never a negative slope; the call then costs what was measured
    (1.0, 0.0)
    """
    slope = max(0.0, (large - small) / (n_large - n_small))
    return round(max(0.0, small - n_small * slope), 9), round(slope, 9)


def truncated_lengths(full: int, probe: int) -> tuple[int, int] | None:
    """(k, :data:`LONG_FACTOR` k) lengths of the small truncated timed calls, or None when the recipe is short
    enough to time whole (its full length is below that many probe lengths: truncating would save little and time
    a larger share of one-off cost).

    >>> truncated_lengths(7820, 64), truncated_lengths(200, 64), truncated_lengths(30, 1), truncated_lengths(30, 2)
    ((64, 256), None, (1, 4), (2, 8))
    """
    return (probe, LONG_FACTOR * probe) if full >= LONG_FACTOR * probe else None


def rate_from_truncated(t_small_k: float, t_large_k: float, t_small_long: float, k: int, full: int,
                        n_small: int = SMALL, n_large: int = LARGE, k_large: int | None = None,
                        t_large_2k: float | None = None, k_long: int | None = None) -> tuple[float, float]:
    """(per-call, per-model) seconds of a call of ``full`` length, from three truncated calls' medians.

    The model: a call of M models and u steps costs ``f + u (c + M s)`` (f once per call: set-up, graph
    capture; c per step: launches, the batch draw; s per model and step). From (SMALL, k) and (SMALL, ``k_long``;
    default 2k, the probe's :data:`LONG_FACTOR` k) the per-step cost u = c + SMALL s of the small call and f; from
    the large call of ``k_large`` steps (default k) v = c + LARGE s; then s and c (each clipped at 0 against noise);
    the full call costs ``f + full c`` plus ``full s`` per model. With ``k_large = k``: s = (t_large − t_small) /
    ((LARGE − SMALL) k).

    ``t_large_2k``: the large call timed at ``2 k_large`` too; then v = (t_large_2k − t_large_k) / k_large, the large
    call's own per-step cost, its one-off part not taken from the small calls. Needed where the first steps of a call
    take another path than the rest (CUDA graphs: a first epoch eager, the later ones replayed, at any M): from one
    length, half of the large call's k = 2 epochs is its eager epoch, and the per-model cost came out as the mean of
    the eager epoch's and a replayed one's — about half the replayed one's, where the eager epoch is launch-bound.

    >>> rate_from_truncated(0.2 + 10 * (0.01 + 2 * 0.001), 0.2 + 10 * (0.01 + 8 * 0.001),
    ...                     0.2 + 20 * (0.01 + 2 * 0.001), k=10, full=1000, n_small=2, n_large=8)
    (10.2, 1.0)
    >>> rate_from_truncated(0.2 + 10 * (0.01 + 2 * 0.001), 0.2 + 3 * (0.01 + 500 * 0.001),
    ...                     0.2 + 40 * (0.01 + 2 * 0.001), k=10, full=1000, n_small=2, n_large=500, k_large=3,
    ...                     k_long=40)
    (10.2, 1.0)
    """
    kl = k if k_large is None else k_large
    k2 = 2 * k if k_long is None else k_long
    if k2 <= k:
        raise ValueError(f"k_long={k2}: the second small call must be longer than the first (k={k})")
    u = (t_small_long - t_small_k) / (k2 - k)  # c + SMALL s
    if t_large_2k is not None:
        v = (t_large_2k - t_large_k) / kl  # c + LARGE s, from the large call's own two lengths
    else:
        v = (t_large_k - (t_small_k - k * u)) / kl  # c + LARGE s (the call's f taken from the small calls)
    s = max(0.0, (v - u) / (n_large - n_small))
    c = max(0.0, u - n_small * s)
    f = max(0.0, t_small_k - k * (c + n_small * s))
    return round(f + full * c, 9), round(full * s, 9)


#: most models in the probe's large call (a black-box block of 1000 DP-SGD heads at 5 000 x 128 costs 1.55x
#: per model and step what calls of 2 and 32 models gave: its (M, P) buffers leave the cache)
MAX_PROBE_BLOCK = 1000
#: fewest DP-SGD steps of the large call on the CPU (it is cut to about four times the model-steps of a
#: LARGE-model call of k steps, so that timing a 1000-model block stays cheap)
MIN_LARGE_STEPS = 8


def probe_block(blackbox_block: int, runs_per_side: int) -> int:
    """Models in the probe's large call: the canaries stage's largest batched call — a black-box block of
    ``min(blackbox.block, 2 × runs per side)`` models —, at least :data:`LARGE`, at most :data:`MAX_PROBE_BLOCK`.

    >>> probe_block(1000, 2000), probe_block(1000, 32), probe_block(1000, 4)
    (1000, 64, 32)
    """
    return max(LARGE, min(MAX_PROBE_BLOCK, int(blackbox_block), 2 * int(runs_per_side)))


def large_call_length(k: int, block: int, device: str, dp: bool) -> int:
    """Steps (DP-SGD) or epochs (SGD) of the large truncated call of ``block`` models: ``k`` on CUDA (a call
    under two graphs' worth of steps would take another path) and for SGD epochs (one epoch is the least);
    on the CPU about four times a LARGE-model call's model-steps, at least :data:`MIN_LARGE_STEPS`.

    >>> large_call_length(64, 1000, "cpu", True), large_call_length(64, 32, "cpu", True)
    (8, 64)
    >>> large_call_length(64, 1000, "cuda:0", True), large_call_length(1, 1000, "cpu", False)
    (64, 1)
    """
    if not dp or not str(device).startswith("cpu"):
        return k
    return max(min(k, MIN_LARGE_STEPS), min(k, 4 * LARGE * k // max(1, block)))


def large_call_twice(device: str) -> bool:
    """Whether the large truncated call is timed at two lengths (:func:`rate_from_truncated`'s ``t_large_2k``): on
    CUDA, where a call's first epoch (SGD) or first graph's steps (DP-SGD) take another path than the rest; on the
    CPU every step takes one path, and the large call's second length would double its cost for nothing.

    >>> large_call_twice("cuda"), large_call_twice("cuda:1"), large_call_twice("cpu")
    (True, True, False)
    """
    return str(device).startswith("cuda")


def probe_length(dp: bool, device: str) -> int:
    """Length (DP-SGD steps, SGD epochs) of a truncated timed call: :data:`PROBE_DP_STEPS`, or for SGD
    :data:`PROBE_EPOCHS_GRAPHS` on CUDA and :data:`PROBE_EPOCHS` elsewhere.

    >>> probe_length(True, "cuda"), probe_length(False, "cuda:0"), probe_length(False, "cpu")
    (64, 2, 1)
    """
    if dp:
        return PROBE_DP_STEPS
    return PROBE_EPOCHS_GRAPHS if str(device).startswith("cuda") else PROBE_EPOCHS


@dataclass(frozen=True)
class FitProbe:
    """What :func:`measure_fit_rate` measured: a call of k models costs ``call_seconds + k × model_seconds``
    (``timed_by``: how); ``slowdown``: how much slower a call runs while ``workers`` run at once (1.0 when
    not measured; ``slowdown_by`` says how, or why not)."""

    call_seconds: float
    model_seconds: float
    timed_by: str
    slowdown: float = 1.0
    workers: int = 1
    slowdown_by: str = ""


def measure_fit_rate(spec: Any, X: np.ndarray, y: np.ndarray, n_classes: int, device: str,
                     seed: int, *, block: int = LARGE, workers: int = 1) -> FitProbe:
    """What a call of ``spec``'s trainer costs on (X, y) (module docstring); the caller has already run the
    release fit of a sequential trainer (the warm-up). ``block``: models of a truncated probe's large call
    (:func:`probe_block`; a recipe timed whole keeps :data:`LARGE`). ``workers`` > 1: the large call (a
    sequential trainer's fit) is timed again on that many workers at once (:func:`concurrent_slowdown`); on a
    CUDA device the batched calls run in the stage's own process, not on workers, and are not."""
    from privaudit.defenders.recipes import recipe_from_spec

    recipe = recipe_from_spec(spec, len(y), n_classes)
    if recipe is None:
        from privaudit.defenders.registry import make_defender
        from privaudit.repro.threads import one_thread

        seeds = iter(range(seed, seed + REPEATS))
        # on one BLAS/OpenMP thread, as every audit fit runs (canary shards, LTU retrains, reference models);
        # torch's threads are the stage's (stages/_runner.py)
        with one_thread(torch_too=False):
            per_fit = _median_seconds(lambda: make_defender(spec, n_classes=n_classes, device=device).fit(
                X, y, seed=next(seeds)))

        def fit_on_one_thread() -> None:
            with one_thread(torch_too=False):
                make_defender(spec, n_classes=n_classes, device=device).fit(X, y, seed=seed)

        slow, slow_by = concurrent_slowdown(fit_on_one_thread, per_fit, workers)
        return FitProbe(0.0, per_fit, f"median of {REPEATS} fits on one BLAS thread after the release fit",
                        slow, workers, slow_by)
    import torch

    from privaudit.train import TrainData, train_heads

    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64, device=device)

    def call(models: int, length: int | None = None) -> Callable[[], Any]:
        # as the canaries stage's blocks: ``models`` heads on the whole Defender set in one call (``length``: the
        # recipe cut to that many DP-SGD steps or SGD epochs)
        r = recipe if length is None else (replace(recipe, dp=replace(recipe.dp, steps=length))
                                           if recipe.dp is not None else replace(recipe, epochs=length))
        return lambda: train_heads(r, TrainData(Xt, yt, n_models=models), n_classes,
                                   torch.Generator(device=device).manual_seed(seed + models))

    full = recipe.dp.steps if recipe.dp is not None else recipe.epochs
    lengths = truncated_lengths(full, probe_length(recipe.dp is not None, device))
    if lengths is None:
        call(SMALL)()  # warm-up: kernels, allocator, the accountant's σ (cached per recipe)
        small, large = _median_seconds(call(SMALL)), _median_seconds(call(LARGE))
        per_call, per_model = rate_from_blocks(small, large)
        slow, slow_by = _batched_slowdown(call(LARGE), large, workers, device)
        return FitProbe(per_call, per_model,
                        f"medians of {REPEATS} calls of {SMALL} and {LARGE} models after a warm-up",
                        slow, workers, slow_by)
    k, k2 = lengths
    large = max(LARGE, int(block))
    kl = large_call_length(k, large, device, recipe.dp is not None)
    call(SMALL, k)()  # warm-up
    t_small, t_large, t_small_long = (_median_seconds(call(SMALL, k)), _median_seconds(call(large, kl)),
                                      _median_seconds(call(SMALL, k2)))
    # on CUDA a call's first epoch or steps take another path than the rest (graphs): the large call at two lengths
    t_large_2k = _median_seconds(call(large, 2 * kl)) if large_call_twice(device) else None
    per_call, per_model = rate_from_truncated(t_small, t_large, t_small_long, k, full, n_large=large, k_large=kl,
                                              t_large_2k=t_large_2k, k_long=k2)
    unit = "steps" if recipe.dp is not None else "epochs"
    slow, slow_by = _batched_slowdown(call(large, kl), t_large, workers, device)
    larges = f"{large} x {kl}" + (f", {large} x {2 * kl}" if t_large_2k is not None else "")
    return FitProbe(per_call, per_model, (f"medians of {REPEATS} truncated calls ({SMALL} x {k}, {larges}, "
                                          f"{SMALL} x {k2} {unit}) after a warm-up, scaled to {full} {unit}"),
                    slow, workers, slow_by)


def _batched_slowdown(call: Callable[[], Any], alone: float, workers: int, device: str) -> tuple[float, str]:
    if str(device).startswith("cuda"):
        return 1.0, "not measured: on a CUDA device the batched calls run in the stage's process, not on workers"
    return concurrent_slowdown(call, alone, workers)


#: the longest a worker waits for the others to start before the probe gives up (slowdown 1.0, said)
BARRIER_TIMEOUT_S = 60.0


def concurrent_slowdown(call: Callable[[], Any], alone_seconds: float, workers: int) -> tuple[float, str]:
    """``(slowdown, how)``: the mean over ``workers`` forked workers, started together, of their call's seconds
    over ``alone_seconds`` (the same call's median alone), at least 1. The workers are
    :func:`privaudit.repro.worker_pool.map_in_processes`'s (the stages' own pools, one BLAS and torch thread
    each); each waits at a barrier until all have started, then times ``call`` :data:`REPEATS` times and keeps the
    median, as ``alone_seconds`` is kept (a single call each read 0.87-1.49x on this shared host, where one call
    alone varies by 30 % within seconds). ``(1.0, why not)`` for fewer than 2 workers or where
    this process cannot fork its workers (:func:`privaudit.repro.worker_pool.fork_refusal`; a loky pool's fresh
    interpreters would not start together)."""
    from privaudit.repro.worker_pool import fork_refusal, map_in_processes

    if workers < 2:
        return 1.0, "one worker: no contention"
    if (why := fork_refusal()) is not None:
        return 1.0, f"not measured: workers cannot be forked here ({why})"
    if not alone_seconds > 0:
        return 1.0, f"not measured: the call alone took {alone_seconds!r} s"
    import multiprocessing

    barrier = multiprocessing.get_context("fork").Barrier(workers)
    try:
        seconds = list(map_in_processes(_timed_together, [(i,) for i in range(workers)], workers,
                                        shared=(barrier, call, REPEATS), fork_only=True))
    except threading.BrokenBarrierError:
        return 1.0, f"not measured: {workers} workers did not all start within {BARRIER_TIMEOUT_S:g} s"
    ratio = statistics.fmean(seconds) / alone_seconds
    return max(1.0, ratio), (f"{workers} forked workers at once: {statistics.fmean(seconds):.3g} s a call against "
                             f"{alone_seconds:.3g} s alone ({ratio:.2f}x)")


def _timed_together(barrier: Any, call: Callable[[], Any], repeats: int, _worker: int) -> float:
    """In a forked worker: wait for the others, then the median seconds of ``repeats`` calls."""
    barrier.wait(timeout=BARRIER_TIMEOUT_S)
    return _median_seconds(call, repeats)
