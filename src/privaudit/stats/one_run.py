"""Epsilon lower bounds from a single training run (Steinke, Nasr & Jagielski 2023).

"Privacy Auditing with One (1) Training Run" (NeurIPS 2023, arXiv:2305.08846): m canaries, each
included in the training set independently with probability 1/2; the auditor guesses
"included"/"excluded" for r of them and abstains on the rest; v guesses are correct.

Pure DP (the paper's Proposition for eps-DP, a special case of its main theorem): if the training
algorithm is epsilon-DP, the number of correct guesses W is stochastically dominated by
``Binomial(r, e^eps / (1 + e^eps))`` (the accuracy of epsilon-DP randomized response).
Main Theorem (Theorem 3 of arXiv:2305.08846v1; (eps, delta)-DP): for all v,

    P[W >= v] <= f(v) + 2 m delta * max_{i = 1..v} (f(v - i) - f(v)) / i,
    f(v) = P[Binomial(r, e^eps / (1 + e^eps)) >= v].

The right-hand side is the p-value computed by the paper's appendix code (``p_value_DP_audit``)
for "the algorithm is (eps, delta)-DP"; the reported lower bound is the largest eps below which
every eps is rejected at ``level`` (the paper's beta; its ``get_eps_audit`` bisects; here delta = 0
uses :func:`scipy.optimize.brentq` on the monotone p-value and delta > 0 refines the first crossing
of an eps grid).  With probability >= 1 - level the returned value does not exceed the true epsilon.
Theorem numbering is cited from memory of the arXiv v1 text (the paper is not in shared/papers).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

from ._checks import check_counts, check_prob

__all__ = ["one_run_p_value", "one_run_epsilon_lower_bound", "one_run_counts"]

_EPS_MAX = 60.0


def one_run_p_value(correct: int, guesses: int, canaries: int, epsilon: float, delta: float = 0.0) -> float:
    """P-value of v correct out of r guesses under (epsilon, delta)-DP (Steinke et al. 2023, Thm 3).

    ``min(1, f(v) + 2 m delta max_i (f(v-i) - f(v))/i)`` with
    ``f(v) = P[Binomial(r, e^eps/(1+e^eps)) >= v]``.

    Args:
        correct: number v of correct guesses.
        guesses: number r of non-abstained guesses.
        canaries: number m of randomly included canaries.
        epsilon: epsilon of the null hypothesis (>= 0).
        delta: delta of the null hypothesis in [0, 1].

    >>> round(one_run_p_value(70, 100, 1000, 0.0), 6)
    3.9e-05
    >>> round(one_run_p_value(50, 100, 1000, 1.0), 6)
    1.0
    """
    v, r, m = check_counts(correct, guesses, canaries)
    eps = float(epsilon)
    if not (eps >= 0.0):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    delta = check_prob("delta", delta)
    q = 1.0 / (1.0 + math.exp(-eps)) if math.isfinite(eps) else 1.0
    f_v = float(stats.binom.sf(v - 1, r, q))
    if delta == 0.0 or v == 0:
        return min(1.0, f_v)
    i = np.arange(1, v + 1)
    cum = np.cumsum(stats.binom.pmf(v - i, r, q))  # f(v - i) - f(v)
    alpha = float(np.max(cum / i))
    return min(1.0, f_v + 2.0 * m * delta * alpha)


def one_run_epsilon_lower_bound(
    correct: int, guesses: int, canaries: int, delta: float = 0.0, *, level: float
) -> float:
    """Epsilon lower bound from one run with m canaries, r guesses, v correct (Steinke et al. 2023).

    Returns ``sup{eps >= 0 : one_run_p_value(v, r, m, eps', delta) < level for all eps' <= eps}``,
    i.e. every epsilon below the returned value is rejected at ``level`` (0.0 if even eps = 0
    is not rejected).  ``P(returned > true epsilon) <= level``.

    Args:
        correct: number v of correct guesses (0 <= v <= r).
        guesses: number r of non-abstained guesses (r <= m).
        canaries: number m of canaries, each included independently with probability 1/2.
        delta: delta of the DP guarantee being audited.
        level: failure probability of the one-sided bound returned (1 - confidence; the paper's
            beta), in (0, 1).

    >>> round(one_run_epsilon_lower_bound(900, 1000, 1000, level=0.05), 3)
    2.021
    >>> one_run_epsilon_lower_bound(520, 1000, 1000, level=0.05)
    0.0
    """
    v, r, m = check_counts(correct, guesses, canaries)
    delta = check_prob("delta", delta)
    level = check_prob("level", level, open_low=True, open_high=True)

    def g(eps: float) -> float:
        return one_run_p_value(v, r, m, eps, delta) - level

    if g(0.0) >= 0.0:
        return 0.0
    if delta == 0.0:  # f(v) is increasing in eps: bracket by doubling, then one root
        hi = 1.0
        while g(hi) < 0.0:
            if hi >= _EPS_MAX:
                return _EPS_MAX
            hi *= 2.0
        return float(optimize.brentq(g, 0.0, hi, xtol=1e-10))
    # with delta > 0 the p-value need not be monotone in eps: take the FIRST crossing of a grid
    grid = np.concatenate([np.linspace(0.0, 10.0, 201), np.linspace(10.0, _EPS_MAX, 101)[1:]])
    crossed = np.flatnonzero(_p_values(v, r, m, grid, delta) >= level)
    if crossed.size == 0:
        return _EPS_MAX
    j = int(crossed[0])  # j >= 1 since g(0) < 0
    return float(optimize.brentq(g, float(grid[j - 1]), float(grid[j]), xtol=1e-10))


def _p_values(v: int, r: int, m: int, eps: np.ndarray, delta: float) -> np.ndarray:
    """Vectorized :func:`one_run_p_value` over an array of epsilons (v >= 1, delta > 0)."""
    q = 1.0 / (1.0 + np.exp(-eps))
    f_v = stats.binom.sf(v - 1, r, q)
    i = np.arange(1, v + 1)
    cum = np.cumsum(stats.binom.pmf(v - i[None, :], r, q[:, None]), axis=1)
    alpha = np.max(cum / i[None, :], axis=1)
    return np.minimum(1.0, f_v + 2.0 * m * delta * alpha)


def one_run_counts(included: ArrayLike, guesses: ArrayLike) -> tuple[int, int, int]:
    """``(v, r, m)`` from inclusion bits and guesses (Steinke et al. 2023, Algorithm 1 output).

    Args:
        included: ``(m,)`` array, 1/True if canary i was included in training, else 0/False.
        guesses: ``(m,)`` array in {-1, 0, +1}: +1 guess "included", -1 guess "excluded", 0 abstain.

    Returns:
        ``(correct, guesses, canaries)`` ready for :func:`one_run_epsilon_lower_bound`.

    >>> one_run_counts([1, 0, 1, 0], [1, 1, 0, -1])
    (2, 3, 4)
    """
    s = np.asarray(included)
    t = np.asarray(guesses)
    if s.ndim != 1 or t.shape != s.shape or s.size == 0:
        raise ValueError(f"included and guesses must be 1-D of equal non-zero length, got {s.shape} and {t.shape}")
    if not np.all(np.isin(s, (0, 1))):
        raise ValueError("included must hold only 0/1 (or booleans)")
    if not np.all(np.isin(t, (-1, 0, 1))):
        raise ValueError("guesses must hold only -1, 0 or +1")
    signed = 2 * s.astype(np.int64) - 1
    r = int(np.count_nonzero(t))
    v = int(np.count_nonzero(t * signed == 1))
    return v, r, int(s.size)
