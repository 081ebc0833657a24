"""Input validation helpers shared by :mod:`privaudit.stats` (ValueError naming the bad value)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray


def check_prob(name: str, value: float, *, open_low: bool = False, open_high: bool = False) -> float:
    """Return ``value`` as float after checking it is a probability in [0, 1] (ends optionally open)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
    low_ok = v > 0.0 if open_low else v >= 0.0
    high_ok = v < 1.0 if open_high else v <= 1.0
    if not (math.isfinite(v) and low_ok and high_ok):
        lo = "(" if open_low else "["
        hi = ")" if open_high else "]"
        raise ValueError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return v


def check_end_level(value: float, name: str = "level") -> float:
    """Return ``value`` as float after checking it is the failure probability of EACH end of a
    two-sided interval, in (0, 0.5) (the pair misses with probability ``2 * value`` < 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 0.5), got {value!r}") from None
    if not (math.isfinite(v) and 0.0 < v < 0.5):
        raise ValueError(f"{name} must lie in (0, 0.5) (the failure probability of each end), got {value!r}")
    return v


def check_nonneg(name: str, value: float, *, allow_inf: bool = False) -> float:
    """Return ``value`` as float after checking it is >= 0 (and finite unless ``allow_inf``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}") from None
    if math.isnan(v) or v < 0 or (not allow_inf and math.isinf(v)):
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    return v


def check_positive(name: str, value: float) -> float:
    """Return ``value`` as float after checking it is finite and > 0."""
    v = check_nonneg(name, value)
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return v


def check_int(name: str, value: Any, *, minimum: int = 0) -> int:
    """Return ``value`` as int after checking it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return v


def check_counts(correct: int, guesses: int, canaries: int) -> tuple[int, int, int]:
    """A one-run audit's counts, checked: 0 <= correct <= guesses <= canaries, canaries >= 1."""
    m = check_int("canaries", canaries, minimum=1)
    r = check_int("guesses", guesses, minimum=0)
    v = check_int("correct", correct, minimum=0)
    if r > m:
        raise ValueError(f"guesses must be <= canaries={m}, got {r}")
    if v > r:
        raise ValueError(f"correct must be <= guesses={r}, got {v}")
    return v, r, m


def check_binary_matrix(name: str, x: Any) -> NDArray[np.float64]:
    """Return ``x`` as a float (n, K) array after checking it is a non-empty 2-D 0/1 array."""
    arr = np.asarray(x)
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be a 2-D (n, K) array of 0/1 outcomes, got a 1-D array of shape {arr.shape}; "
            "use x[:, None] for K=1"
        )
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-D (n, K) array, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold 0/1 numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all((arr == 0.0) | (arr == 1.0)):
        bad = arr[(arr != 0.0) & (arr != 1.0)].ravel()[0]
        raise ValueError(f"{name} must hold only 0/1 values, found {bad!r}")
    return arr
