"""Measure what a call of a defender's trainer costs on this machine, one-off costs apart (for the plan).

* A sequential trainer (sklearn kinds, ``kind: python``, PATE): its release fit (timed by the defenders
  stage) is the warm-up — imports, a first call's caches, an accountant computing σ (a user trainer took
  6.2 s on its first fit against 0.017 s per later fit) — then :data:`REPEATS` fits on the Defender set;
  the median is the seconds per fit.
* A batched trainer (``torch_mlp``, ``dp_sgd``: :func:`privaudit.train.train_heads`): one warm-up call of
  :data:`SMALL` models, then :data:`REPEATS` calls of :data:`SMALL` and of :data:`LARGE` models on the
  Defender set; from the two medians the per-model slope and the per-call intercept, so that a block of a
  thousand models is planned as ``call + 1000 × slope``, not as a thousand release fits.

The fits here use their own seeds and leave every result untouched; they run only to be timed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["LARGE", "REPEATS", "SMALL", "measure_fit_rate", "rate_from_blocks"]

#: timed repetitions of each measurement (the median is kept)
REPEATS = 3
#: models per call of the batched trainer's two measured block sizes
SMALL, LARGE = 2, 8


def _median_seconds(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))


def rate_from_blocks(small: float, large: float, n_small: int = SMALL, n_large: int = LARGE) -> tuple[float, float]:
    """(per-call, per-model) seconds from the median times of calls of ``n_small`` and ``n_large`` models.

    >>> rate_from_blocks(1.0, 1.6)
    (0.8, 0.1)
    >>> rate_from_blocks(1.0, 0.9)  # noise: never a negative slope; the call then costs what was measured
    (1.0, 0.0)
    """
    slope = max(0.0, (large - small) / (n_large - n_small))
    return round(max(0.0, small - n_small * slope), 9), round(slope, 9)


def measure_fit_rate(spec: Any, X: np.ndarray, y: np.ndarray, n_classes: int, device: str,
                     seed: int) -> tuple[float, float, str]:
    """(per-call seconds, per-model seconds, how) of ``spec``'s trainer on (X, y) (module docstring); the
    caller has already run the release fit of a sequential trainer (the warm-up)."""
    from privaudit.defenders.recipes import recipe_from_spec

    recipe = recipe_from_spec(spec, len(y), n_classes)
    if recipe is None:
        from privaudit.defenders.registry import make_defender

        seeds = iter(range(seed, seed + REPEATS))
        per_fit = _median_seconds(lambda: make_defender(spec, n_classes=n_classes, device=device).fit(
            X, y, seed=next(seeds)))
        return 0.0, per_fit, f"median of {REPEATS} fits after the release fit"
    import torch

    from privaudit.train import TrainData, train_heads

    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64, device=device)

    def call(models: int) -> Callable[[], Any]:
        # as the canaries stage's blocks: ``models`` heads on the whole Defender set in one call
        return lambda: train_heads(recipe, TrainData(Xt, yt, n_models=models), n_classes,
                                   torch.Generator(device=device).manual_seed(seed + models))

    call(SMALL)()  # warm-up: kernels, allocator, the accountant's σ (cached per recipe)
    small, large = _median_seconds(call(SMALL)), _median_seconds(call(LARGE))
    per_call, per_model = rate_from_blocks(small, large)
    return per_call, per_model, f"medians of {REPEATS} calls of {SMALL} and {LARGE} models after a warm-up"
