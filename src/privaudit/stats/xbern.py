"""Confidence intervals for the mean of exchangeable Bernoulli (XBern) vectors.

Implements Pillutla et al. 2023, "Unleashing the Power of Randomization in Auditing
Differentially Private ML" (LiDP paper), Appendix C:

* moments ``m_1..m_L`` of each trial by the recurrence of Proposition 6, eq. (14):
  ``m_{l+1} = m_l (K m_1 - l) / (K - l)``;
* Bernstein intervals of 1st / 2nd / 4th order (Algorithms 2, 3, 4), whose equations are solved
  with a bracketing root finder (:func:`scipy.optimize.brentq`);
* Wilson intervals of 1st / 2nd / 4th order (Algorithms 5, 6, 7), closed form (quadratics);
* ``method="clopper_pearson"``: the exact (Clopper-Pearson) 1st-order interval (issue 13).

Clopper-Pearson (1st order only).  The 1st-order intervals treat each trial's mean
``m_1 = (#ones)/K`` as a variable in [0, 1] with the Bernoulli variance proxy; Clopper-Pearson
takes ``s = n * mean(m_1)`` successes in ``n`` trials, ``lower = Beta.ppf(level; s, n - s + 1)``,
``upper = Beta.ppf(1 - level; s + 1, n - s)`` (real-valued ``s`` for K > 1).  For K = 1 it is the
exact binomial bound (each side misses with probability <= level for every p and n); for K > 1 it
is exact when a trial's K outcomes are all equal and conservative in simulation otherwise
(Beta-mixed exchangeable counts, n in {8, 16, 64}, K in {4, 8}: miss <= 0.020 at level = 0.025,
Wilson 1st order up to 0.034).  Wilson is only asymptotic: at n = 16 its one-sided miss, computed
exactly by enumerating the binomial, reaches 0.16 (p near 0 or 1) against a nominal 0.025, and
0.049 (lower bound, p >= 0.3) / 0.032 (upper bound, p <= 0.2) where LiDP audits are decided
(0.037 / 0.029 at n = 64, 0.031 / 0.027 at n = 256, 0.028 / 0.026 at n = 1024).
Power cost of Clopper-Pearson, measured as the mean certified eps_hat of a Gaussian-mechanism
audit (analytic Gaussian mechanism, delta = 1e-5, level = 0.05, order 1, tau tuned separately for
each method on 4000 other trials, 200 audits per cell, same audits for both methods), Wilson ->
Clopper-Pearson (difference):

=====  ===========================================  ===========================================
n      eps = 4: K = 1 / K = sqrt(n)                 eps = 2: K = 1 / K = sqrt(n)
=====  ===========================================  ===========================================
16     0.060 -> 0.036 (-0.024) / 0 -> 0             0.015 -> 0.008 (-0.007) / 0 -> 0
64     0.338 -> 0.298 (-0.040) / 0.263 -> 0.228     0.051 -> 0.040 (-0.011) / 0.001 -> 0.000
256    0.845 -> 0.821 (-0.024) / 0.793 -> 0.776     0.227 -> 0.216 (-0.012) / 0.203 -> 0.188
1024   1.310 -> 1.300 (-0.009) / 1.267 -> 1.259     0.505 -> 0.497 (-0.007) / 0.495 -> 0.489
=====  ===========================================  ===========================================

i.e. at most 0.04 in eps_hat, about 1% of eps_hat at n = 1024, 2-8% at n = 256 and more at
n <= 64, where the Wilson bound's extra height is mostly its excess miss rate.  The LiDP audit
(:func:`privaudit.audits.lidp.lidp_audit`) therefore uses Clopper-Pearson in place of
every Wilson interval of effective order 1, at all n.

Every bound is **one-sided at failure probability level** (the paper's beta):
``P(mu_1 < lower) <= level`` and ``P(mu_1 > upper) <= level`` (Bernstein and, for K = 1,
Clopper-Pearson: exactly; Wilson: asymptotically, Prop. 11), with
``Z_level = Phi^{-1}(1 - level)``.  Order ``L`` splits level over its ``L`` auxiliary bounds as in the
algorithms (``log(2/level)``, ``Z_{level/2}`` for order 2; ``log(4/level)``, ``Z_{level/4}`` for order 4).

Known misprints, resolved as stated in issue 3 (verified against the algebra):

* Variance proxy for ``m_1`` (orders 2 and 4): we use ``x/K - x^2 + (K-1)/K * mu2_bar`` from
  eq. (17) and Algorithms 6/7.  Algorithms 3/4 print it without the ``(K-1)/K`` factor.
* 4th order, bound on ``mu_2``: Algorithms 4/7 use ``(mu4_bar - mu3_bar^2)`` where eq. (18) has
  ``(mu_4 - mu_2^2)``.  We follow the algorithms (Alg. 7's quadratic, and the same variance proxy
  ``sigma_2^2(x) = 2x(1-x)/(K(K-1)) + 4(K-2)/(K(K-1)) (mu3_bar - x^2)
  + (K-2)(K-3)/(K(K-1)) (mu4_bar - mu3_bar^2)`` for the Bernstein version).  When the resulting
  Wilson quadratic has no real root the trivial bound ``mu2_bar = 1`` is used.

Orders need enough canaries: order 2 needs ``K >= 2`` (Prop. 8), order 4 needs ``K >= 4``
(Prop. 9).  For smaller K the order is lowered to the largest of {1, 2} that K supports (for
K = 1 every order is the plain Bernoulli interval, since ``m_2 = m_3 = m_4 = 0``).
"""

from __future__ import annotations

from typing import Callable, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from ._checks import check_binary_matrix, check_int, check_prob

__all__ = [
    "xbern_moments",
    "xbern_interval",
    "xbern_interval_from_counts",
    "effective_order",
]

Method = Literal["wilson", "bernstein", "clopper_pearson"]
METHODS: tuple[str, ...] = ("wilson", "bernstein", "clopper_pearson")
_ORDERS = (1, 2, 4)
_GRID = 65


def effective_order(order: int, k: int) -> int:
    """Order actually used for ``K = k`` canaries: ``order`` lowered to what K supports.

    Order 2 needs K >= 2 (LiDP Prop. 8) and order 4 needs K >= 4 (Prop. 9).

    >>> effective_order(4, 64), effective_order(4, 3), effective_order(2, 1)
    (4, 2, 1)
    """
    if order not in _ORDERS:
        raise ValueError(f"order must be one of {_ORDERS}, got {order!r}")
    k = check_int("k", k, minimum=1)
    if order == 4 and k < 4:
        order = 2
    if order == 2 and k < 2:
        order = 1
    return order


def _moments_from_m1(m1: NDArray[np.float64], k: int, order: int) -> NDArray[np.float64]:
    """Stack m_1..m_order (last axis) from m_1 by the recurrence of Prop. 6, eq. (14)."""
    out = np.empty(m1.shape + (order,), dtype=np.float64)
    out[..., 0] = m1
    for ell in range(1, order):
        val = out[..., ell - 1] * (k * m1 - ell) / (k - ell)
        out[..., ell] = np.where(val <= 0.0, 0.0, val)  # exact zeros (no -0.0)
    return out


def xbern_moments(x: ArrayLike, order: int) -> NDArray[np.float64]:
    """Per-trial XBern moments ``m_1..m_order`` by the recurrence of LiDP Prop. 6, eq. (14).

    ``m_l = binom(K, l)^{-1} sum_{j_1<...<j_l} x_{j_1}...x_{j_l}`` (eq. 13), computed in O(K l) as
    ``m_{l+1} = m_l (K m_1 - l) / (K - l)``.

    Args:
        x: ``(n, K)`` array of 0/1 outcomes (n trials, K canaries).
        order: number of moments, ``1 <= order <= K``.

    Returns:
        ``(n, order)`` float array; column ``l-1`` holds ``m_l`` of each trial.

    >>> xbern_moments([[1, 1, 0, 1], [0, 0, 0, 1]], 3)
    array([[0.75, 0.5 , 0.25],
           [0.25, 0.  , 0.  ]])
    """
    arr = check_binary_matrix("x", x)
    k = arr.shape[1]
    order = check_int("order", order, minimum=1)
    if order > k:
        raise ValueError(f"order must be <= K (number of columns of x) = {k}, got {order}")
    return _moments_from_m1(arr.mean(axis=1), k, order)


# ----------------------------------------------------------------------------- Wilson (Alg. 5-7)


def _larger_root(a: NDArray, b: NDArray, c: NDArray) -> NDArray:
    """Larger root of ``a x^2 - b x + c = 0`` (a > 0); NaN where there is no real root."""
    disc = b * b - 4.0 * a * c
    with np.errstate(invalid="ignore"):
        return np.where(disc >= 0, (b + np.sqrt(np.maximum(disc, 0.0))) / (2.0 * a), np.nan)


def _roots(a: NDArray, b: NDArray, c: NDArray) -> tuple[NDArray, NDArray]:
    disc = np.maximum(b * b - 4.0 * a * c, 0.0)
    s = np.sqrt(disc)
    return (b - s) / (2.0 * a), (b + s) / (2.0 * a)


def _wilson_first_order_upper(mu: NDArray, n: int, z: float) -> NDArray:
    """Larger root of (n+z^2)x^2 - (2n mu + z^2)x + n mu^2 (Alg. 5 / Alg. 6 line 5 / Alg. 7 line 5)."""
    a = np.full_like(mu, n + z * z)
    up = _larger_root(a, 2.0 * n * mu + z * z, n * mu * mu)
    return np.clip(np.where(np.isnan(up), 1.0, up), mu, 1.0)


def _wilson_mu1(mu1: NDArray, mu2_bar: NDArray, n: int, k: int, z: float) -> tuple[NDArray, NDArray]:
    """Roots of (n+z^2)x^2 - (2n mu1 + z^2/K)x + n mu1^2 - (K-1)/K z^2 mu2_bar (Alg. 6 l.6, Alg. 7 l.7)."""
    a = np.full_like(mu1, n + z * z)
    b = 2.0 * n * mu1 + z * z / k
    c = n * mu1 * mu1 - (k - 1) / k * z * z * mu2_bar
    lo, up = _roots(a, b, c)
    return np.clip(lo, 0.0, mu1), np.clip(up, mu1, 1.0)


def _wilson(mus: NDArray, n: int, k: int, level: float, order: int) -> tuple[NDArray, NDArray]:
    mu1 = mus[..., 0]
    if order == 1:  # Algorithm 5
        z = float(stats.norm.isf(level))
        a = np.full_like(mu1, n + z * z)
        lo, up = _roots(a, 2.0 * n * mu1 + z * z, n * mu1 * mu1)
        return np.clip(lo, 0.0, mu1), np.clip(up, mu1, 1.0)
    if order == 2:  # Algorithm 6
        z = float(stats.norm.isf(level / 2.0))
        mu2_bar = _wilson_first_order_upper(mus[..., 1], n, z)
        return _wilson_mu1(mu1, mu2_bar, n, k, z)
    # Algorithm 7
    z = float(stats.norm.isf(level / 4.0))
    mu2, mu3, mu4 = mus[..., 1], mus[..., 2], mus[..., 3]
    mu3_bar = _wilson_first_order_upper(mu3, n, z)
    mu4_bar = _wilson_first_order_upper(mu4, n, z)
    kk = k * (k - 1)
    cc = (k - 2) * (k - 3) / kk * (mu4_bar - mu3_bar**2) + 4.0 * (k - 2) / kk * mu3_bar
    a = np.full_like(mu2, n + 2.0 * z * z * (2 * k - 3) / kk)
    b = 2.0 * n * mu2 + 2.0 * z * z / kk
    c = n * mu2 * mu2 - cc * z * z
    mu2_bar = _larger_root(a, b, c)
    mu2_bar = np.clip(np.where(np.isnan(mu2_bar), 1.0, mu2_bar), mu2, 1.0)  # no real root -> 1
    return _wilson_mu1(mu1, mu2_bar, n, k, z)


# -------------------------------------------------------------------------- Bernstein (Alg. 2-4)


def _bernstein_upper(mu: float, var: Callable[[float], float], c1: float, c2: float) -> float:
    """sup{x in [mu, 1] : x - mu - sqrt(c1 var(x)) <= c2}; var is clipped at 0 (conservative)."""

    def g(x: float) -> float:
        return x - mu - float(np.sqrt(c1 * max(var(x), 0.0))) - c2

    if g(1.0) <= 0.0:
        return 1.0
    grid = np.linspace(mu, 1.0, _GRID)
    vals = np.array([g(t) for t in grid])
    j = int(np.flatnonzero(vals <= 0.0)[-1])  # vals[0] = g(mu) < 0 always
    return float(optimize.brentq(g, grid[j], grid[j + 1], xtol=1e-14, rtol=1e-12))


def _bernstein_lower(mu: float, var: Callable[[float], float], c1: float, c2: float) -> float:
    """inf{x in [0, mu] : mu - x - sqrt(c1 var(x)) <= c2}; var is clipped at 0 (conservative)."""

    def f(x: float) -> float:
        return mu - x - float(np.sqrt(c1 * max(var(x), 0.0))) - c2

    if f(0.0) <= 0.0:
        return 0.0
    grid = np.linspace(0.0, mu, _GRID)
    vals = np.array([f(t) for t in grid])
    j = int(np.flatnonzero(vals <= 0.0)[0])  # vals[-1] = f(mu) < 0 always, vals[0] > 0
    return float(optimize.brentq(f, grid[j - 1], grid[j], xtol=1e-14, rtol=1e-12))


def _bernstein_one(m: NDArray, n: int, k: int, level: float, order: int) -> tuple[float, float]:
    log_term = np.log(order / level)
    c1 = 2.0 / n * log_term
    c2 = 2.0 / (3.0 * n) * log_term

    def bern(x: float) -> float:
        return x * (1.0 - x)

    if order == 1:  # Algorithm 2
        var1 = bern
    else:
        if order == 2:  # Algorithm 3 (with the (K-1)/K factor of eq. 17)
            mu2_bar = _bernstein_upper(float(m[1]), bern, c1, c2)
        else:  # Algorithm 4 (variance proxy of Alg. 4/7, see module docstring)
            mu3_bar = _bernstein_upper(float(m[2]), bern, c1, c2)
            mu4_bar = _bernstein_upper(float(m[3]), bern, c1, c2)
            kk = k * (k - 1)
            const = (k - 2) * (k - 3) / kk * (mu4_bar - mu3_bar**2)

            def var2(x: float) -> float:
                return 2.0 * x * (1.0 - x) / kk + 4.0 * (k - 2) / kk * (mu3_bar - x * x) + const

            mu2_bar = _bernstein_upper(float(m[1]), var2, c1, c2)

        def var1(x: float) -> float:
            return x / k - x * x + (k - 1) / k * mu2_bar

    mu1 = float(m[0])
    return _bernstein_lower(mu1, var1, c1, c2), _bernstein_upper(mu1, var1, c1, c2)


def _bernstein(mus: NDArray, n: int, k: int, level: float, order: int) -> tuple[NDArray, NDArray]:
    flat = mus.reshape(-1, mus.shape[-1])
    lo = np.empty(flat.shape[0])
    up = np.empty(flat.shape[0])
    for i, m in enumerate(flat):
        lo[i], up[i] = _bernstein_one(m, n, k, level, order)
    shape = mus.shape[:-1]
    return lo.reshape(shape), up.reshape(shape)


# ------------------------------------------------------------------------- Clopper-Pearson (exact)


def _clopper_pearson(mu1: NDArray, n: int, level: float) -> tuple[NDArray, NDArray]:
    """One-sided Clopper-Pearson bounds at ``level`` each, ``s = n mu1`` successes in ``n`` trials.

    ``lower = Beta.ppf(level; s, n - s + 1)`` (0 when s = 0), ``upper = Beta.ppf(1 - level; s + 1, n - s)``
    (1 when s = n); ``s`` may be fractional (K > 1), the Beta quantiles are then the continuous
    extension of the binomial tail.
    """
    s = np.clip(mu1 * n, 0.0, float(n))
    s = np.where(np.abs(s - np.round(s)) < 1e-9, np.round(s), s)  # exact integers stay integers
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(s > 0, stats.beta.ppf(level, np.maximum(s, 1e-300), n - s + 1.0), 0.0)
        up = np.where(s < n, stats.beta.ppf(1.0 - level, s + 1.0, np.maximum(n - s, 1e-300)), 1.0)
    return np.clip(lo, 0.0, mu1), np.clip(up, mu1, 1.0)


# ------------------------------------------------------------------------------------ public API


def xbern_interval_from_counts(
    counts: ArrayLike, k: int, *, level: float, order: int = 2, method: Method = "wilson"
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """XBern interval on ``mu_1`` from per-trial success counts, vectorized over leading axes.

    ``counts[..., i]`` is the number of ones among the K outcomes of trial ``i``; the per-trial
    moments depend on the outcomes only through this count (``m_l = C(c, l) / C(K, l)``).  This
    is the fast path for evaluating many thresholds at once.

    Args:
        counts: ``(..., n)`` integer array with values in ``[0, k]``.
        k: number of canaries K per trial.
        level: failure probability of each one-sided bound (lower and upper), in (0, 1); the
            pair is a two-sided interval at confidence ``1 - 2 level``.
        order: 1, 2 or 4 (lowered when K is too small, see :func:`effective_order`).
        method: ``"wilson"`` (Alg. 5-7), ``"bernstein"`` (Alg. 2-4) or ``"clopper_pearson"``
            (exact 1st-order interval; needs effective order 1, i.e. ``order=1`` or K = 1).

    Raises:
        ValueError: bad counts/k/level, an unknown method, or ``"clopper_pearson"`` with an
            effective order above 1.

    Returns:
        ``(lower, upper)`` with shape ``counts.shape[:-1]`` (floats for 1-D input).

    >>> lo, up = xbern_interval_from_counts([3, 4, 2, 4, 3], 4, level=0.05, order=2)
    >>> bool(0 < lo < 0.8 < up < 1)
    True
    """
    k = check_int("k", k, minimum=1)
    level = check_prob("level", level, open_low=True, open_high=True)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    order = effective_order(order, k)
    if method == "clopper_pearson" and order != 1:
        raise ValueError(
            f"method 'clopper_pearson' is a first-order interval: use order=1 (got order={order} for K={k})"
        )
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim < 1 or c.shape[-1] < 1:
        raise ValueError(f"counts must have a non-empty trial axis, got shape {c.shape}")
    bad = (c < 0) | (c > k) | (c != np.round(c))
    if np.any(bad):
        raise ValueError(f"counts must be integers in [0, k={k}], found {c[bad].ravel()[0]!r}")
    n = c.shape[-1]
    mus = _moments_from_m1(c / k, k, order).mean(axis=-2)  # (..., order)
    if method == "wilson":
        lo, up = _wilson(mus, n, k, level, order)
    elif method == "clopper_pearson":
        lo, up = _clopper_pearson(mus[..., 0], n, level)
    else:
        lo, up = _bernstein(mus, n, k, level, order)
    if np.ndim(lo) == 0:
        return float(lo), float(up)
    return lo, up


def xbern_interval(
    x: ArrayLike, *, level: float, order: int = 2, method: Method = "wilson"
) -> tuple[float, float]:
    """Confidence bounds on the XBern mean ``mu_1`` from n i.i.d. trials (LiDP App. C, Alg. 2-7).

    Each bound is one-sided at failure probability ``level`` (``Z_level = Phi^{-1}(1 - level)``);
    the pair is a two-sided interval at confidence ``1 - 2 level``.

    Args:
        x: ``(n, K)`` array of 0/1 test outcomes (n trials, K canaries each).
        level: failure probability of each one-sided bound (lower and upper), in (0, 1).
        order: 1, 2 or 4 — number of moments used (Alg. 2/5, 3/6, 4/7).  Lowered to what K
            supports (order 2 needs K >= 2, order 4 needs K >= 4).
        method: ``"wilson"`` (asymptotic, closed form), ``"bernstein"`` (non-asymptotic,
            solved with :func:`scipy.optimize.brentq`) or ``"clopper_pearson"`` (exact for
            K = 1; 1st order only, see the module docstring for its power cost).

    Returns:
        ``(lower, upper)`` with ``0 <= lower <= mean(x) <= upper <= 1``.

    >>> x = [[1, 0], [1, 1], [0, 1], [1, 1]]
    >>> lo, up = xbern_interval(x, level=0.05, order=1)
    >>> round(lo, 3), round(up, 3)
    (0.356, 0.942)
    >>> lo, up = xbern_interval(x, level=0.05, order=1, method="clopper_pearson")
    >>> round(lo, 3), round(up, 3)
    (0.249, 0.987)
    """
    arr = check_binary_matrix("x", x)
    k = arr.shape[1]
    counts = arr.sum(axis=1)
    lo, up = xbern_interval_from_counts(counts, k, level=level, order=order, method=method)
    return float(lo), float(up)
