"""Game 3 (label-DP memorization game) epsilon estimates.

Malek Esmaeili et al. 2021, "Antipodes of Label Differential Privacy: PATE and ALIBI",
Appendix B:

* Theorem B.1: an epsilon-DP mechanism bounds the adversary's correct-guess rate among
  non-abstained guesses, ``eps >= log(CGR / (1 - CGR))``; under (epsilon, delta)-DP the bound
  becomes ``eps >= log((CGR - delta) / (1 - CGR))`` (see :func:`epsilon_from_accuracy`);
* Game 3: Clopper-Pearson bound on the number of correct guesses among the ``M <= N``
  non-abstained guesses (the paper prescribes Clopper-Pearson; the reference code used a normal
  approximation);
* ACGR: per-canary average correct-guess rate over all ``C - 2`` alternative labels, weighted by
  the number of non-abstained guesses (reliability weights).  The paper uses a normal 95%
  interval; we use an interval valid for a bounded mean (:func:`acgr_interval`), because the
  normal one overclaims (a zero-width interval when all canaries have the same rate, and a
  lower-end miss rate of 0.06-0.10 instead of 0.025 with C = 3).

Both ends of the CGR interval are mapped through Theorem B.1 and floored at 0, giving the
"95%-CI eps" ranges of Table 5 (e.g. ``2.9-4.0``, ``0.0-2.2``; ``level = 0.025``).  ``eps_low`` is
a one-sided lower confidence bound at failure probability ``level`` (and ``eps_high`` a one-sided
upper one at ``level``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ._checks import check_end_level, check_int, check_prob
from .binomial import clopper_pearson

__all__ = ["epsilon_from_accuracy", "game3_epsilon", "acgr_epsilon", "acgr_interval"]


def epsilon_from_accuracy(p: float, delta: float = 0.0) -> float:
    """Theorem B.1 mapping: ``log((p - delta) / (1 - p))``, floored at 0 (``inf`` at p = 1).

    Under (epsilon, delta)-DP a balanced binary guess (the trained label is one of two candidates,
    each with probability 1/2) has type I/II errors with ``a + e^eps b >= 1 - delta`` and
    ``e^eps a + b >= 1 - delta``; adding the two gives ``a + b >= 2 (1 - delta) / (1 + e^eps)``,
    so its accuracy ``p = 1 - (a + b) / 2 <= (e^eps + delta) / (1 + e^eps)``, i.e.
    ``eps >= log((p - delta) / (1 - p))``.  With ``delta = 0`` this is Malek et al.'s
    ``log(p / (1 - p))``.  The result is 0.0 when ``p <= (1 + delta) / 2``; it increases with
    ``p`` and decreases with ``delta``.

    Abstention: for an adversary that guesses only a fraction ``g`` of the games, ``p`` is the
    accuracy among its guesses and the same argument gives ``p <= (e^eps + delta / g) /
    (1 + e^eps)``: pass ``delta / g`` as ``delta`` (delta is a probability over all games).

    Args:
        p: correct-guess rate (accuracy among non-abstained guesses) in [0, 1].
        delta: the delta of the (epsilon, delta)-DP claim, in [0, 1] (default 0: pure DP).

    >>> round(epsilon_from_accuracy(0.9), 4)
    2.1972
    >>> epsilon_from_accuracy(0.4), epsilon_from_accuracy(1.0)
    (0.0, inf)
    >>> round(epsilon_from_accuracy(0.9, delta=0.05), 4)
    2.1401
    """
    p = check_prob("p", p)
    delta = check_prob("delta", delta)
    if p >= 1.0:
        return math.inf
    num = p - delta
    if num <= 1.0 - p:
        return 0.0
    return math.log(num / (1.0 - p))


def game3_epsilon(
    correct: int, guesses: int, delta: float = 0.0, *, level: float
) -> tuple[float, float]:
    """Epsilon interval from one run of Game 3 (Malek et al. App. B, Theorem B.1 + Clopper-Pearson).

    ``[lo, hi] = clopper_pearson(correct, guesses, level=level)`` on the correct-guess rate among
    the non-abstained guesses, and ``(eps_low, eps_high) = (epsilon_from_accuracy(lo, delta),
    epsilon_from_accuracy(hi, delta))``.  ``eps_low`` is a one-sided lower bound on epsilon at
    confidence ``1 - level`` (under the paper's heuristic that the N guesses behave as
    independent games).

    Args:
        correct: number of correct guesses, ``0 <= correct <= guesses``.
        guesses: number of non-abstained guesses M (``>= 1``).
        delta: delta of the (epsilon, delta)-DP claim (see :func:`epsilon_from_accuracy`).
        level: failure probability of each one-sided bound (``eps_low`` and ``eps_high``), in
            (0, 0.5): the Clopper-Pearson interval has coverage ``1 - 2 * level`` (0.025: the
            paper's 95% interval).

    Returns:
        ``(eps_low, eps_high)``, both >= 0.

    >>> lo, hi = game3_epsilon(900, 1000, level=0.025)
    >>> round(lo, 3), round(hi, 3)
    (1.99, 2.414)
    >>> game3_epsilon(480, 1000, level=0.025)[0]
    0.0
    """
    guesses = check_int("guesses", guesses, minimum=1)
    correct = check_int("correct", correct, minimum=0)
    if correct > guesses:
        raise ValueError(f"correct must be <= guesses={guesses}, got {correct}")
    lo, hi = clopper_pearson(correct, guesses, level=level)
    return epsilon_from_accuracy(float(lo), delta), epsilon_from_accuracy(float(hi), delta)


def _beta_ppf(q: float, a: float, b: float) -> float:
    return float(stats.beta.ppf(q, a, b))


def _cp_effective(mean: float, n_eff: float, level: float) -> tuple[float, float]:
    """Clopper-Pearson with each end at failure probability ``level`` (coverage 1 - 2 level), ``n_eff``
    (real) trials and ``n_eff * mean`` successes."""
    s = min(max(mean * n_eff, 0.0), n_eff)
    lo = 0.0 if s <= 0.0 else _beta_ppf(level, s, n_eff - s + 1.0)
    hi = 1.0 if s >= n_eff else _beta_ppf(1.0 - level, s + 1.0, n_eff - s)
    return lo, hi


def acgr_interval(
    correct_per_canary: ArrayLike, guesses_per_canary: ArrayLike, *, level: float
) -> tuple[float, float, float]:
    """Reliability-weighted mean of per-canary ACGR and an interval valid for a bounded mean.

    ``ACGR_i = correct_i / M_i`` (0/0 = 0 by the paper's convention), weights ``w_i = M_i``
    (Malek et al. 2021, App. B).  Weighted mean ``mu = sum w ACGR / sum w`` (= pooled
    ``sum correct / sum M``).  The interval is the more conservative (lower end = min, upper end =
    max) of two intervals of coverage ``1 - 2 level`` (each end misses with probability ``level``):

    1. **Student-t** on the reliability-weighted mean: unbiased reliability-weighted variance
       ``s^2 = sum w (ACGR - mu)^2 / (V1 - V2/V1)`` (``V1 = sum w``, ``V2 = sum w^2``), standard
       error ``s * sqrt(V2) / V1`` and ``t_{n_eff - 1}`` quantile, ``n_eff = V1^2 / V2`` (Kish's
       effective number of canaries).  This is the paper's interval with ``t`` for ``z``.  It is
       left out (only 2. is used) when a single canary carries all the weight.
    2. **Clopper-Pearson on the effective number of canaries**: ``n_eff`` trials with
       ``n_eff * mu`` successes (real-valued Beta quantiles).  A rate in [0, 1] with mean ``mu``
       has variance at most ``mu (1 - mu)``, so the weighted mean has variance at most
       ``mu (1 - mu) / n_eff``; this interval is exact when the weights are equal and every
       canary is all-right or all-wrong (the strongest within-canary correlation), and it keeps
       its width when the sample variance is 0 (all canaries with the same rate), where the
       t-interval has zero width (``[7, 7] / [8, 8]`` gave ``(1.946, 1.946)`` with the normal
       interval).

    Why not Clopper-Pearson on the pooled counts ``(sum correct, sum M)``?  It treats the
    ``C - 2`` guesses of a canary as independent, but they share the model's confidence in the
    trained label and are strongly correlated.  With all-or-nothing canaries (C = 10, eps = 5,
    N = 100) "t, or pooled CP when narrower/undefined" missed in 51% of 1000 runs; the interval
    above in 0% (and <= 2.7% over randomized-response, all-or-nothing and overdispersed designs,
    C in {3, 10}, eps in {1, 3, 5}, N in {20, 100, 1000}, against 2.5%).  For C = 3 (one guess
    per canary) both Clopper-Pearson variants coincide with the exact binomial interval.

    Args:
        correct_per_canary: ``(N,)`` correct guesses per canary (over its C-2 alternative labels).
        guesses_per_canary: ``(N,)`` non-abstained guesses ``M_i`` per canary.
        level: failure probability of each one-sided bound (each end of the interval), in
            (0, 0.5) (0.025 gives the 95% interval).

    Returns:
        ``(mean, lower, upper)`` with ``0 <= lower < upper <= 1``.

    >>> m, lo, hi = acgr_interval([8, 9, 7, 8], [10, 10, 10, 10], level=0.025)
    >>> round(m, 3), round(lo, 3), round(hi, 3)
    (0.8, 0.228, 0.998)
    """
    level = check_end_level(level)
    c = np.asarray(correct_per_canary, dtype=np.float64)
    g = np.asarray(guesses_per_canary, dtype=np.float64)
    if c.ndim != 1 or g.ndim != 1 or c.shape != g.shape or c.size == 0:
        raise ValueError(
            f"correct_per_canary and guesses_per_canary must be 1-D of equal non-zero length, "
            f"got shapes {c.shape} and {g.shape}"
        )
    if np.any(g < 0) or np.any(c < 0) or np.any(c > g):
        raise ValueError("need 0 <= correct_per_canary <= guesses_per_canary element-wise")
    v1 = float(g.sum())
    if v1 <= 0:
        raise ValueError("guesses_per_canary is all zero: the adversary abstained on every canary")
    acgr: NDArray[np.float64] = np.divide(c, g, out=np.zeros_like(c), where=g > 0)
    mean = min(max(float(np.sum(g * acgr) / v1), 0.0), 1.0)
    v2 = float(np.sum(g * g))
    n_eff = v1 * v1 / v2
    lo, hi = _cp_effective(mean, n_eff, level)
    denom = v1 - v2 / v1
    if denom > 0 and n_eff > 1.0:  # else a single canary carries all the weight: no spread estimate
        var = float(np.sum(g * (acgr - mean) ** 2) / denom)
        se = math.sqrt(var * v2) / v1
        t = float(stats.t.isf(level, n_eff - 1.0))
        lo, hi = min(lo, mean - t * se), max(hi, mean + t * se)
    return mean, max(0.0, lo), min(1.0, hi)


def acgr_epsilon(
    correct_per_canary: ArrayLike, guesses_per_canary: ArrayLike, delta: float = 0.0, *,
    level: float,
) -> tuple[float, float]:
    """Epsilon interval from the reliability-weighted ACGR (Malek et al. App. B, Table 5).

    The interval of :func:`acgr_interval` (the more conservative of a Student-t interval and a
    Clopper-Pearson interval on the effective number of canaries) mapped through Theorem B.1
    (:func:`epsilon_from_accuracy`) at both ends.  ``eps_low`` is a one-sided lower bound at
    failure probability ``level``.

    Args:
        correct_per_canary: ``(N,)`` correct guesses per canary over its C-2 alternative labels.
        guesses_per_canary: ``(N,)`` non-abstained guesses per canary.
        delta: delta of the (epsilon, delta)-DP claim (see :func:`epsilon_from_accuracy`).
        level: failure probability of each one-sided bound (``eps_low`` and ``eps_high``), in
            (0, 0.5) (0.025 = the paper's 95% interval).

    Returns:
        ``(eps_low, eps_high)``, both >= 0.

    >>> lo, hi = acgr_epsilon([80, 90, 70, 80] * 25, [100] * 100, level=0.025)
    >>> round(lo, 3), round(hi, 3)
    (0.886, 1.931)
    """
    _, lo, hi = acgr_interval(correct_per_canary, guesses_per_canary, level=level)
    return epsilon_from_accuracy(lo, delta), epsilon_from_accuracy(hi, delta)
