"""Exact (Clopper-Pearson) binomial confidence intervals.

Used by Game 3 (Malek et al. 2021, App. B: "count the number of correct guesses among the
M <= N instances where the adversary made a guess and apply a Clopper-Pearson bound") and as the
exact reference for the K = 1 Bernoulli case of the XBern intervals.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ._checks import check_end_level

__all__ = ["clopper_pearson"]


def clopper_pearson(
    k: ArrayLike, n: ArrayLike, *, level: float
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """Two-sided exact Clopper-Pearson interval for a binomial proportion, coverage ``1 - 2 * level``.

    ``lower = Beta.ppf(level; k, n-k+1)`` (0 when k = 0) and
    ``upper = Beta.ppf(1-level; k+1, n-k)`` (1 when k = n); identical to
    ``scipy.stats.binomtest(k, n).proportion_ci(1 - 2 * level, method="exact")``.  Each end is a
    one-sided bound: ``P(p < lower) <= level`` and ``P(p > upper) <= level``.

    Args:
        k: number of successes, scalar or array (broadcast against ``n``); integers ``0 <= k <= n``.
        n: number of trials, scalar or array; integers ``>= 1``.
        level: failure probability of each one-sided bound (each end of the interval), in
            (0, 0.5); the pair misses with probability <= ``2 * level``.

    Returns:
        ``(lower, upper)``: floats for scalar input, else arrays of the broadcast shape.

    Raises:
        ValueError: if ``k``/``n`` are not integers with ``0 <= k <= n``, ``n >= 1``, or level is not in (0, 0.5).

    >>> lo, hi = clopper_pearson(7, 10, level=0.025)
    >>> round(lo, 4), round(hi, 4)
    (0.3475, 0.9333)
    >>> clopper_pearson(0, 5, level=0.025)[0], clopper_pearson(5, 5, level=0.025)[1]
    (0.0, 1.0)
    """
    level = check_end_level(level)
    k_arr = np.asarray(k)
    n_arr = np.asarray(n)
    scalar = k_arr.ndim == 0 and n_arr.ndim == 0
    for name, arr in (("k", k_arr), ("n", n_arr)):
        if not np.issubdtype(arr.dtype, np.number) or np.any(~np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be integer-valued, got {arr!r}")
    k_f, n_f = np.broadcast_arrays(k_arr.astype(np.float64), n_arr.astype(np.float64))
    if np.any(n_f < 1):
        raise ValueError(f"n must be >= 1, got {n!r}")
    if np.any(k_f < 0) or np.any(k_f > n_f):
        raise ValueError(f"k must satisfy 0 <= k <= n, got k={k!r}, n={n!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k_f > 0, stats.beta.ppf(level, k_f, n_f - k_f + 1.0), 0.0)
        upper = np.where(k_f < n_f, stats.beta.ppf(1.0 - level, k_f + 1.0, n_f - k_f), 1.0)
    if scalar:
        return float(lower), float(upper)
    return lower.astype(np.float64), upper.astype(np.float64)
