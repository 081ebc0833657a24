"""The Gaussian mechanism of the LiDP paper (Pillutla et al. 2023, §4 and App. E).

Sum query ``q(D) = sum_{z in D} z`` over the unit sphere of R^d (l2 sensitivity 1) released as
``q(D) + sigma * xi``, ``xi ~ N(0, I_d)``, with sigma calibrated to a known (epsilon, delta) by the
*analytic Gaussian mechanism* (Balle & Wang 2018, "Improving the Gaussian Mechanism for
Differential Privacy", Theorem 8): the mechanism is (eps, delta)-DP iff

    Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta) <= delta,

which is tight, so the audited mechanism has exactly the claimed privacy.

Auditing follows Algorithm 1: per trial, K canaries drawn uniformly from the sphere;
``theta_1 = A(D u {c_1..c_K})`` gives ``x_k = 1[<theta_1, c_k> >= tau]`` (eq. 25) and
``theta_0 = A(D u {c_1..c_{K-1}})`` tested on m fresh canaries gives
``y_j = 1[<theta_0, c'_j> >= tau]``; ``D = {0_d}`` contributes nothing (App. E).

Only inner products matter, so the simulation works in the span of the p canaries of a trial:
their Gram matrix is drawn exactly through the Bartlett decomposition of a Wishart(d, I_p)
matrix (rows of the Bartlett factor, normalised, have the joint law of p uniform unit vectors
of R^d up to a rotation) and the noise projected on that span is ``N(0, sigma^2 I_p)``.  This
costs O(p^2) per trial for any d >= p (d < p falls back to explicit vectors).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from ._checks import check_int, check_nonneg, check_positive, check_prob
from .thresholds import select_threshold
from .xbern import Method

__all__ = [
    "gaussian_dp_delta",
    "gaussian_mechanism_sigma",
    "simulate_gaussian_scores",
    "simulate_gaussian_audit",
]

_CHUNK_ELEMS = 2_000_000


def gaussian_dp_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Smallest delta for which ``N(0, sigma^2)`` noise gives (epsilon, delta)-DP (Balle & Wang 2018, Thm 8).

    >>> round(gaussian_dp_delta(1.0, 1.0), 4)
    0.1269
    """
    sigma = check_positive("sigma", sigma)
    eps = check_nonneg("epsilon", epsilon)
    delta_s = check_positive("sensitivity", sensitivity)
    a = delta_s / (2.0 * sigma)
    b = eps * sigma / delta_s
    return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b)))


def gaussian_mechanism_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise scale of the analytic Gaussian mechanism for (epsilon, delta)-DP (Balle & Wang 2018).

    The smallest sigma with ``gaussian_dp_delta(sigma, epsilon) <= delta`` (found with
    :func:`scipy.optimize.brentq`); smaller than the classical ``sqrt(2 ln(1.25/delta))/epsilon``.

    Args:
        epsilon: target epsilon > 0.
        delta: target delta in (0, 1).
        sensitivity: l2 sensitivity (1 for the sum over the unit sphere).

    >>> s = gaussian_mechanism_sigma(1.0, 1e-5)
    >>> round(s, 3), abs(gaussian_dp_delta(s, 1.0) - 1e-5) < 1e-12
    (3.731, True)
    """
    eps = check_positive("epsilon", epsilon)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    sens = check_positive("sensitivity", sensitivity)

    def f(log_sigma: float) -> float:
        return gaussian_dp_delta(math.exp(log_sigma), eps, sens) - delta

    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while f(lo) < 0:
        lo -= 10.0
    while f(hi) > 0:
        hi += 10.0
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-13))


def _sphere_frames(rng: np.random.Generator, batch: int, p: int, dim: int) -> NDArray[np.float64]:
    """(batch, p, p) rows = p uniform unit vectors of R^dim in coordinates of their span (Bartlett)."""
    low = np.tril(rng.standard_normal((batch, p, p)), k=-1)
    df = dim - np.arange(p)
    diag = np.sqrt(rng.chisquare(df, size=(batch, p)))
    idx = np.arange(p)
    low[:, idx, idx] = diag
    return low / np.linalg.norm(low, axis=2, keepdims=True)


def _sphere_explicit(rng: np.random.Generator, batch: int, p: int, dim: int) -> NDArray[np.float64]:
    z = rng.standard_normal((batch, p, dim))
    return z / np.linalg.norm(z, axis=2, keepdims=True)


def _scores_block(
    rng: np.random.Generator, batch: int, n_in: int, n_test_fresh: int, dim: int, sigma: float
) -> NDArray[np.float64]:
    """Scores <xi + sum_{k<n_in} c_k, c_j> for the tested canaries of each trial.

    If ``n_test_fresh == 0`` the tested canaries are the n_in included ones, else the
    ``n_test_fresh`` fresh canaries.  Returns (batch, n_tested).
    """
    p = n_in + n_test_fresh
    frames = _sphere_frames(rng, batch, p, dim) if dim >= p else _sphere_explicit(rng, batch, p, dim)
    width = frames.shape[2]
    release = sigma * rng.standard_normal((batch, width)) + frames[:, :n_in, :].sum(axis=1)
    tested = frames[:, n_in:, :] if n_test_fresh else frames
    return np.einsum("bkp,bp->bk", tested, release)


def simulate_gaussian_scores(
    sigma: float, n_trials: int, k_canaries: int, dim: int, rng: np.random.Generator,
    m_null: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Raw test scores of LiDP Algorithm 1 on the Gaussian sum mechanism (§4 / App. E).

    Args:
        sigma: noise standard deviation of the mechanism.
        n_trials: number n of trials (pairs of training runs).
        k_canaries: K canaries inserted in ``D_1`` (``D_0`` gets the first K-1).
        dim: dimension d of the unit sphere.
        rng: numpy Generator (the only source of randomness).
        m_null: number m of fresh canaries tested on ``theta_0`` (default K).

    Returns:
        ``(scores_x, scores_y)`` of shapes ``(n, K)`` and ``(n, m)``: ``<theta_1, c_k>`` and
        ``<theta_0, c'_j>``.

    >>> sx, sy = simulate_gaussian_scores(1.0, 5, 3, 1000, np.random.default_rng(0))
    >>> sx.shape, sy.shape
    ((5, 3), (5, 3))
    """
    sigma = check_positive("sigma", sigma)
    n = check_int("n_trials", n_trials, minimum=1)
    k = check_int("k_canaries", k_canaries, minimum=1)
    d = check_int("dim", dim, minimum=1)
    m = k if m_null is None else check_int("m_null", m_null, minimum=1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    sx = np.empty((n, k))
    sy = np.empty((n, m))
    for which, out, n_in, fresh in ((0, sx, k, 0), (1, sy, k - 1, m)):
        p = n_in + fresh
        per = max(1, _CHUNK_ELEMS // (p * min(p, d) if d >= p else p * d))
        for start in range(0, n, per):
            b = min(per, n - start)
            out[start:start + b] = _scores_block(rng, b, n_in, fresh, d, sigma)
    return sx, sy


def simulate_gaussian_audit(
    epsilon: float, delta: float, n_trials: int, k_canaries: int, dim: int, rng: np.random.Generator,
    threshold: float | None = None, m_null: int | None = None, tune_trials: int | None = None,
    *, level: float, order: int = 2, method: Method = "wilson", n_thresholds: int = 40,
) -> tuple[NDArray[np.int8], NDArray[np.int8]]:
    """0/1 outcome arrays of a LiDP audit of a Gaussian mechanism with known (epsilon, delta).

    sigma comes from :func:`gaussian_mechanism_sigma`.  If ``threshold`` is None, tau is tuned on
    ``tune_trials`` (default ``n_trials``) separate trials over a grid of ``n_thresholds`` quantiles
    of the tuning null scores, maximising the bound of the given ``level/order/method`` (LiDP App. E,
    "Tuning the threshold"); the returned outcomes come from fresh trials, so
    ``lidp_epsilon_lower_bound(x, y, delta, level=level, order=order, method=method)`` on them is an
    honest bound.  ``level``: failure probability of that one-sided ε lower bound, used only to tune tau
    (required even when ``threshold`` is given).

    Returns:
        ``(x, y)``: int8 arrays ``(n, K)`` and ``(n, m)`` for :func:`privaudit.stats.lidp_epsilon_lower_bound`.

    >>> x, y = simulate_gaussian_audit(2.0, 1e-5, 64, 8, 1000, np.random.default_rng(0), level=0.05)
    >>> x.shape, y.shape, x.dtype.name
    ((64, 8), (64, 8), 'int8')
    """
    sigma = gaussian_mechanism_sigma(epsilon, delta)
    n = check_int("n_trials", n_trials, minimum=1)
    if threshold is None:
        nt = n if tune_trials is None else check_int("tune_trials", tune_trials, minimum=1)
        check_int("n_thresholds", n_thresholds, minimum=1)
        tx, ty = simulate_gaussian_scores(sigma, nt, k_canaries, dim, rng, m_null)
        levels = 1.0 - np.geomspace(0.5, 1.0 / (ty.size + 1), n_thresholds)
        grid = np.unique(np.quantile(ty, levels))
        tau = select_threshold(tx, ty, grid, delta, level=level, order=order, method=method).threshold
    else:
        tau = float(threshold)
        if not math.isfinite(tau):
            raise ValueError(f"threshold must be finite, got {threshold!r}")
    sx, sy = simulate_gaussian_scores(sigma, n, k_canaries, dim, rng, m_null)
    return (sx >= tau).astype(np.int8), (sy >= tau).astype(np.int8)

