"""Izzo et al. 2023: Theorem 4 (eta <-> eps), Theorem 7 / Corollary 8 noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from privaudit.stats import (
    epsilon_for_mip_eta,
    mi_accuracy_bound,
    mip_eta,
    mip_noise_scale,
    mip_norm,
    sample_mip_noise,
)


@pytest.mark.parametrize("eps", [1e-4, 1e-3, 1e-2])
def test_eta_is_eps_over_4_for_small_eps(eps: float) -> None:
    assert mip_eta(eps) == pytest.approx(eps / 4, rel=1e-4)


def test_theorem4_values() -> None:
    assert mip_eta(1.0) == pytest.approx(1 / (1 + math.exp(-1)) - 0.5)
    assert mip_eta(0.0) == 0.0 and mip_eta(math.inf) == 0.5
    # eta-MIP accuracy 1/2 + eta equals Thudi's bound at p = 1/2 (both tight for eps-DP)
    assert 0.5 + mip_eta(2.0) == pytest.approx(mi_accuracy_bound(2.0))


@given(eps=st.floats(0, 15))  # beyond, 1 - 2 eta underflows double precision
@settings(max_examples=50, deadline=None)
def test_roundtrip(eps: float) -> None:
    assert epsilon_for_mip_eta(mip_eta(eps)) == pytest.approx(eps, rel=1e-9, abs=1e-9)


def test_noise_scale() -> None:
    assert mip_noise_scale(0.1, 2) == pytest.approx((6.16 / 0.1) ** 2)
    assert mip_noise_scale(0.1, 4) == pytest.approx((6.16 / 0.1) ** 1.5)
    assert mip_noise_scale(0.1, 2, rule="theorem7") == pytest.approx(75.0**2)
    with pytest.raises(ValueError, match="moment"):
        mip_noise_scale(0.1, 1)
    with pytest.raises(ValueError, match="eta"):
        mip_noise_scale(0.0)
    with pytest.raises(ValueError, match="eta"):
        epsilon_for_mip_eta(0.7)


@pytest.mark.parametrize("d,moment", [(1, 2), (3, 2), (10, 4)])
def test_sampler_radius_is_gamma_d_b(d: int, moment: int) -> None:
    """Density prop. to exp(-||x||/b) in R^d has ||X|| ~ Gamma(d, b) (not the printed Laplace(b))."""
    rng = np.random.default_rng(d)
    sigma = rng.uniform(0.5, 2.0, d)
    eta = 0.3
    b = mip_noise_scale(eta, moment)
    x = sample_mip_noise(sigma, eta, rng, moment=moment, size=4000)
    radii = np.asarray(mip_norm(x, sigma, moment))
    assert sps.kstest(radii, sps.gamma(a=d, scale=b).cdf).pvalue > 1e-3
    printed = sample_mip_noise(sigma, eta, rng, moment=moment, size=4000, radius="laplace_printed")
    printed_r = np.asarray(mip_norm(printed, sigma, moment))
    if d == 1:  # in one dimension both samplers are the Laplace density
        assert sps.ks_2samp(radii, printed_r).pvalue > 1e-3
    else:  # the printed sampler has E||X|| = b instead of d*b
        assert printed_r.mean() == pytest.approx(b, rel=0.1)
        assert radii.mean() == pytest.approx(d * b, rel=0.1)


def test_sampler_direction_is_cone_measure_for_m2() -> None:
    """For M = 2 and equal sigma, X/||X|| is uniform on the sphere: coordinates are symmetric."""
    rng = np.random.default_rng(5)
    x = sample_mip_noise(np.ones(3), 0.4, rng, size=3000)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert np.abs(u.mean(axis=0)).max() < 0.05
    assert sps.kstest(u[:, 0], sps.uniform(-1, 2).cdf).pvalue > 1e-3  # Archimedes: uniform in 3-D


def test_sampler_validation() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="sigma"):
        sample_mip_noise([1.0, -1.0], 0.1, rng)
    with pytest.raises(ValueError, match="rng"):
        sample_mip_noise([1.0], 0.1, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="radius"):
        sample_mip_noise([1.0], 0.1, rng, radius="normal")  # type: ignore[arg-type]
