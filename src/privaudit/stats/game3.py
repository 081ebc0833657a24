"""Game 3 (label-DP memorization game) epsilon estimates.

Malek Esmaeili et al. 2021, "Antipodes of Label Differential Privacy: PATE and ALIBI",
Appendix B:

* Theorem B.1: an epsilon-DP mechanism bounds the adversary's correct-guess rate among
  non-abstained guesses, ``eps >= log(CGR / (1 - CGR))``;
* Game 3: Clopper-Pearson bound on the number of correct guesses among the ``M <= N``
  non-abstained guesses (the paper prescribes Clopper-Pearson; the reference code used a normal
  approximation);
* ACGR: per-canary average correct-guess rate over all ``C - 2`` alternative labels, weighted by
  the number of non-abstained guesses (reliability weights), with a normal 95% interval.

Both ends of the CGR interval are mapped through Theorem B.1 and floored at 0, giving the
"95%-CI eps" ranges of Table 5 (e.g. ``2.9-4.0``, ``0.0-2.2``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ._checks import check_int, check_prob
from .binomial import clopper_pearson

__all__ = ["epsilon_from_accuracy", "game3_epsilon", "acgr_epsilon", "acgr_interval"]


def epsilon_from_accuracy(p: float) -> float:
    """Theorem B.1 mapping: ``log(p / (1 - p))`` for ``p > 1/2``, else 0.0 (``inf`` at p = 1).

    Args:
        p: correct-guess rate (accuracy among non-abstained guesses) in [0, 1].

    >>> round(epsilon_from_accuracy(0.9), 4)
    2.1972
    >>> epsilon_from_accuracy(0.4), epsilon_from_accuracy(1.0)
    (0.0, inf)
    """
    p = check_prob("p", p)
    if p <= 0.5:
        return 0.0
    if p >= 1.0:
        return math.inf
    return math.log(p / (1.0 - p))


def game3_epsilon(correct: int, guesses: int, alpha: float = 0.05) -> tuple[float, float]:
    """Epsilon interval from one run of Game 3 (Malek et al. App. B, Theorem B.1 + Clopper-Pearson).

    ``[lo, hi] = clopper_pearson(correct, guesses, alpha)`` on the correct-guess rate among the
    non-abstained guesses, and ``(eps_low, eps_high) = (epsilon_from_accuracy(lo),
    epsilon_from_accuracy(hi))``.  ``eps_low`` is a lower bound on epsilon at confidence
    ``1 - alpha/2`` (under the paper's heuristic that the N guesses behave as independent games).

    Args:
        correct: number of correct guesses, ``0 <= correct <= guesses``.
        guesses: number of non-abstained guesses M (``>= 1``).
        alpha: two-sided miss probability of the Clopper-Pearson interval.

    Returns:
        ``(eps_low, eps_high)``, both >= 0.

    >>> lo, hi = game3_epsilon(900, 1000)
    >>> round(lo, 3), round(hi, 3)
    (1.99, 2.414)
    >>> game3_epsilon(480, 1000)[0]
    0.0
    """
    guesses = check_int("guesses", guesses, minimum=1)
    correct = check_int("correct", correct, minimum=0)
    if correct > guesses:
        raise ValueError(f"correct must be <= guesses={guesses}, got {correct}")
    lo, hi = clopper_pearson(correct, guesses, alpha)
    return epsilon_from_accuracy(float(lo)), epsilon_from_accuracy(float(hi))


def acgr_interval(
    correct_per_canary: ArrayLike, guesses_per_canary: ArrayLike, alpha: float = 0.05
) -> tuple[float, float, float]:
    """Reliability-weighted mean of per-canary ACGR and its normal interval (Malek et al. App. B).

    ``ACGR_i = correct_i / M_i`` (0/0 = 0 by the paper's convention), weights ``w_i = M_i``.
    Weighted mean ``mu = sum w ACGR / sum w``; unbiased reliability-weighted variance
    ``s^2 = sum w (ACGR - mu)^2 / (V1 - V2/V1)`` with ``V1 = sum w``, ``V2 = sum w^2``; the standard
    error of the weighted mean is ``s * sqrt(V2) / V1`` (i.e. ``s / sqrt(n_eff)``,
    ``n_eff = V1^2 / V2``) and the interval is ``mu -/+ z_{1-alpha/2} * se`` clipped to [0, 1].

    Args:
        correct_per_canary: ``(N,)`` correct guesses per canary (over its C-2 alternative labels).
        guesses_per_canary: ``(N,)`` non-abstained guesses ``M_i`` per canary.
        alpha: two-sided miss probability of the normal interval (0.05 gives the 95% interval).

    Returns:
        ``(mean, lower, upper)``.

    >>> m, lo, hi = acgr_interval([8, 9, 7, 8], [10, 10, 10, 10])
    >>> round(m, 3), round(lo, 3), round(hi, 3)
    (0.8, 0.72, 0.88)
    """
    alpha = check_prob("alpha", alpha, open_low=True, open_high=True)
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
    mean = float(np.sum(g * acgr) / v1)
    v2 = float(np.sum(g * g))
    denom = v1 - v2 / v1
    if denom <= 0:  # a single canary carries all the weight: no spread can be estimated
        return mean, 0.0, 1.0
    var = float(np.sum(g * (acgr - mean) ** 2) / denom)
    se = math.sqrt(var * v2) / v1
    z = float(stats.norm.isf(alpha / 2.0))
    return mean, max(0.0, mean - z * se), min(1.0, mean + z * se)


def acgr_epsilon(
    correct_per_canary: ArrayLike, guesses_per_canary: ArrayLike, alpha: float = 0.05
) -> tuple[float, float]:
    """Epsilon interval from the reliability-weighted ACGR (Malek et al. App. B, Table 5).

    The normal interval of :func:`acgr_interval` mapped through Theorem B.1
    (:func:`epsilon_from_accuracy`) at both ends.

    Args:
        correct_per_canary: ``(N,)`` correct guesses per canary over its C-2 alternative labels.
        guesses_per_canary: ``(N,)`` non-abstained guesses per canary.
        alpha: two-sided miss probability (0.05 = the paper's 95% interval).

    Returns:
        ``(eps_low, eps_high)``, both >= 0.

    >>> lo, hi = acgr_epsilon([8, 9, 7, 8], [10, 10, 10, 10])
    >>> round(lo, 3), round(hi, 3)
    (0.944, 1.993)
    """
    _, lo, hi = acgr_interval(correct_per_canary, guesses_per_canary, alpha)
    return epsilon_from_accuracy(lo), epsilon_from_accuracy(hi)
