"""Membership-inference privacy (MIP) (Izzo et al. 2023, "Provable Membership Inference Privacy").

* Theorem 4: an epsilon-DP algorithm is eta-MIP with ``eta = 1/(1 + e^{-eps}) - 1/2`` (tight);
  ``eta ~ eps/4`` for small eps, and back ``eps = log((1 + 2 eta)/(1 - 2 eta))``.
* Theorem 7: adding noise X with density proportional to ``exp(-||X|| / (c sigma))``,
  ``c = (7.5/eta)^{1 + 2/M}``, where ``sigma^M`` bounds the M-th central moment of the output in
  the norm ``||.||``, gives eta-MIP.
* Corollary 8: with ``||x||_{sigma,M} = (sum_i |x_i|^M / (d sigma_i^M))^{1/M}`` (so sigma = 1) the
  constant improves to 6.16 for M >= 2: scale ``b = (6.16/eta)^{1 + 2/M}``.

Sampler (issue 3): Corollary 8 / Algorithm 1 print ``r ~ Laplace(b)`` for the radius of
``X = r U``.  In d > 1 dimensions the density ``exp(-||x||/b)`` that Theorem 7 needs has radius
``||X|| ~ Gamma(d, b)`` (the volume element is ``r^{d-1} dr``) and direction distributed by the
cone measure of the unit sphere, which is what ``U = Y/||Y||``, ``Y_i ~ GenNormal(0, sigma_i, M)``
gives.  :func:`sample_mip_noise` draws the Gamma radius by default; the printed Laplace radius is
available only as ``radius="laplace_printed"`` and does NOT give Theorem 7's density for d > 1.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._checks import check_int, check_nonneg, check_prob

__all__ = [
    "mip_eta",
    "epsilon_for_mip_eta",
    "mip_noise_scale",
    "mip_norm",
    "sample_mip_noise",
]


def mip_eta(epsilon: float) -> float:
    """eta of the eta-MIP guarantee implied by epsilon-DP (Izzo et al. Theorem 4).

    ``eta = 1/(1 + e^{-eps}) - 1/2 = tanh(eps/2)/2`` (about eps/4 for small eps).

    >>> round(mip_eta(1.0), 4), round(mip_eta(0.01) / 0.01, 4)
    (0.2311, 0.25)
    """
    eps = check_nonneg("epsilon", epsilon, allow_inf=True)
    return 0.5 * math.tanh(eps / 2.0) if math.isfinite(eps) else 0.5


def epsilon_for_mip_eta(eta: float) -> float:
    """Smallest epsilon whose DP guarantee implies eta-MIP via Theorem 4: ``log((1+2eta)/(1-2eta))``.

    >>> round(epsilon_for_mip_eta(mip_eta(1.5)), 12)
    1.5
    """
    eta = check_prob("eta", eta)
    if eta >= 0.5:
        if eta == 0.5:
            return math.inf
        raise ValueError(f"eta must lie in [0, 1/2], got {eta!r}")
    return 2.0 * math.atanh(2.0 * eta)


def mip_noise_scale(
    eta: float, moment: int = 2, rule: Literal["corollary8", "theorem7"] = "corollary8"
) -> float:
    """Radial scale b of the MIP noise, in units of the moment bound sigma (Izzo Thm 7 / Cor. 8).

    ``b = (C/eta)^{1 + 2/M}`` with ``C = 6.16`` (Corollary 8, needs M >= 2, norm
    ``||.||_{sigma,M}``) or ``C = 7.5`` (Theorem 7, any M >= 1; multiply by sigma).

    Args:
        eta: target MIP parameter in (0, 1/2].
        moment: moment order M.
        rule: ``"corollary8"`` or ``"theorem7"``.

    >>> round(mip_noise_scale(0.1), 1), round(mip_noise_scale(0.1, rule="theorem7"), 1)
    (3794.6, 5625.0)
    """
    eta = check_prob("eta", eta, open_low=True)
    if eta > 0.5:
        raise ValueError(f"eta must lie in (0, 1/2], got {eta!r}")
    if rule not in ("corollary8", "theorem7"):
        raise ValueError(f"rule must be 'corollary8' or 'theorem7', got {rule!r}")
    m = check_int("moment", moment, minimum=2 if rule == "corollary8" else 1)
    const = 6.16 if rule == "corollary8" else 7.5
    return (const / eta) ** (1.0 + 2.0 / m)


def mip_norm(x: ArrayLike, sigma: ArrayLike, moment: int = 2) -> NDArray[np.float64] | float:
    """``||x||_{sigma,M} = (sum_i |x_i|^M / (d sigma_i^M))^{1/M}`` over the last axis (Corollary 8).

    >>> mip_norm([3.0, 4.0], [1.0, 1.0], 2) == math.sqrt(12.5)
    True
    """
    xa = np.asarray(x, dtype=np.float64)
    s = np.asarray(sigma, dtype=np.float64)
    m = check_int("moment", moment, minimum=1)
    if s.ndim != 1 or np.any(s <= 0) or xa.shape[-1:] != s.shape:
        raise ValueError(f"sigma must be a positive (d,) array matching x's last axis, got {s.shape} vs {xa.shape}")
    d = s.size
    out = (np.sum(np.abs(xa) ** m / (d * s**m), axis=-1)) ** (1.0 / m)
    return float(out) if np.ndim(out) == 0 else out


def sample_mip_noise(
    sigma: ArrayLike, eta: float, rng: np.random.Generator, moment: int = 2, size: int | None = None,
    radius: Literal["gamma", "laplace_printed"] = "gamma",
) -> NDArray[np.float64]:
    """Draw MIP noise X = R U of Corollary 8 with density proportional to ``exp(-||x||_{sigma,M} / b)``.

    ``U = Y / ||Y||_{sigma,M}`` with ``Y_i ~ GenNormal(0, sigma_i, M)``; ``b = mip_noise_scale(eta, M)``.
    ``radius="gamma"`` (default) draws ``R ~ Gamma(d, b)``, which gives exactly the density of
    Theorem 7.  ``radius="laplace_printed"`` draws ``R ~ Laplace(0, b)`` as printed in Corollary 8 /
    Algorithm 1 — for d > 1 that is NOT the density Theorem 7 needs (kept for comparison only).

    Args:
        sigma: ``(d,)`` per-coordinate M-th central moment bounds ``sigma_i``.
        eta: target MIP parameter in (0, 1/2].
        rng: numpy Generator.
        moment: M >= 2.
        size: number of draws (None for a single ``(d,)`` draw).

    Returns:
        ``(d,)`` or ``(size, d)`` array.

    >>> x = sample_mip_noise([1.0, 2.0, 0.5], 0.25, np.random.default_rng(0), size=4)
    >>> x.shape
    (4, 3)
    """
    from scipy import stats  # here, not at the top: mip_eta (the bounds stage) needs no scipy

    s = np.asarray(sigma, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"sigma must be a non-empty (d,) array of positive numbers, got {sigma!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    m = check_int("moment", moment, minimum=2)
    b = mip_noise_scale(eta, m)
    n = 1 if size is None else check_int("size", size, minimum=1)
    d = s.size
    y = stats.gennorm.rvs(m, scale=s, size=(n, d), random_state=rng)
    u = y / np.asarray(mip_norm(y, s, m)).reshape(n, 1)
    if radius == "gamma":
        r = rng.gamma(shape=d, scale=b, size=n)
    elif radius == "laplace_printed":
        r = rng.laplace(0.0, b, size=n)
    else:
        raise ValueError(f"radius must be 'gamma' or 'laplace_printed', got {radius!r}")
    x = r[:, None] * u
    return x[0] if size is None else x
