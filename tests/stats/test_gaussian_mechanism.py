"""The LiDP Gaussian mechanism (§4 / App. E): calibration, no overclaiming, and K = sqrt(n) gain."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from privaudit.stats.gaussian_mechanism import (
    gaussian_dp_delta,
    gaussian_mechanism_sigma,
    simulate_gaussian_audit,
    simulate_gaussian_scores,
)
from privaudit.stats import certify_split, lidp_epsilon_lower_bound

DELTA = 1e-5


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_analytic_calibration(eps: float) -> None:
    sigma = gaussian_mechanism_sigma(eps, DELTA)
    assert gaussian_dp_delta(sigma, eps) == pytest.approx(DELTA, rel=1e-8)
    assert gaussian_dp_delta(0.99 * sigma, eps) > DELTA  # the smallest such sigma
    if eps <= 1.0:  # the classical calibration (valid for eps <= 1) adds more noise
        assert sigma < math.sqrt(2 * math.log(1.25 / DELTA)) / eps


def test_calibration_validation() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_mechanism_sigma(0.0, DELTA)
    with pytest.raises(ValueError, match="delta"):
        gaussian_mechanism_sigma(1.0, 0.0)
    with pytest.raises(ValueError, match="rng"):
        simulate_gaussian_scores(1.0, 10, 2, 100, rng=42)  # type: ignore[arg-type]


def test_score_distribution() -> None:
    """<theta_1, c_k> ~ 1 + N(0, sigma^2 + (K-1)/d); null scores have mean 0 (exact span sampling)."""
    rng = np.random.default_rng(0)
    sigma, k, d = 0.7, 5, 20
    sx, sy = simulate_gaussian_scores(sigma, 20000, k, d, rng, m_null=3)
    assert sy.shape == (20000, 3)
    var = sigma**2 + (k - 1) / d
    assert sx.mean() == pytest.approx(1.0, abs=0.02) and sx.var() == pytest.approx(var, rel=0.03)
    assert sy.mean() == pytest.approx(0.0, abs=0.02) and sy.var() == pytest.approx(var, rel=0.03)
    # d < number of canaries falls back to explicit vectors with the same law
    sx2, _ = simulate_gaussian_scores(sigma, 20000, k, 3, rng)
    assert sx2.var() == pytest.approx(sigma**2 + (k - 1) / 3, rel=0.05)


def test_no_overclaim_over_200_repetitions() -> None:
    """Certified eps_hat (tau tuned on separate trials) exceeds the true eps in at most level of runs."""
    eps, level, reps, n = 2.0, 0.05, 200, 256
    rng = np.random.default_rng(2024)
    t0 = time.perf_counter()
    results = {"K=16, 2nd-order Wilson": [], "K=1, 1st-order Wilson": []}
    for _ in range(reps):
        x, y = simulate_gaussian_audit(eps, DELTA, n, 16, 1000, rng, level=level, order=2)
        results["K=16, 2nd-order Wilson"].append(lidp_epsilon_lower_bound(x, y, DELTA, level=level, order=2))
        x, y = simulate_gaussian_audit(eps, DELTA, n, 1, 1000, rng, level=level, order=1)
        results["K=1, 1st-order Wilson"].append(lidp_epsilon_lower_bound(x, y, DELTA, level=level, order=1))
    for name, vals in results.items():
        arr = np.array(vals)
        print(f"{name}: mean eps_hat {arr.mean():.3f}, max {arr.max():.3f}, P(eps_hat > {eps}) = {np.mean(arr > eps):.3f}")
        assert np.mean(arr > eps) <= level
    assert np.mean(results["K=16, 2nd-order Wilson"]) > 0.2  # the audit has power
    print(f"({time.perf_counter() - t0:.1f}s)")


def test_sqrt_n_canaries_beat_one_canary_at_n_1024() -> None:
    """LiDP's central claim (§4, Fig. 3): K = sqrt(n) with 2nd-order Wilson certifies more than K = 1."""
    eps, n = 2.0, 1024
    k = round(math.sqrt(n))
    rng = np.random.default_rng(7)
    k1, kk = [], []
    for _ in range(3):
        x, y = simulate_gaussian_audit(eps, DELTA, n, 1, 10**5, rng, level=0.05, order=1)
        k1.append(lidp_epsilon_lower_bound(x, y, DELTA, level=0.05, order=1))
        x, y = simulate_gaussian_audit(eps, DELTA, n, k, 10**5, rng, level=0.05, order=2)
        kk.append(lidp_epsilon_lower_bound(x, y, DELTA, level=0.05, order=2))
    print(f"n={n}, eps={eps}: K=1 (1st-order Wilson) eps_hat={np.mean(k1):.3f} {np.round(k1, 3)}; "
          f"K={k} (2nd-order Wilson) eps_hat={np.mean(kk):.3f} {np.round(kk, 3)}")
    assert np.mean(kk) > np.mean(k1)
    assert min(kk) > 0


def test_known_epsilon_self_check_catches_miscalibration() -> None:
    """A mechanism that really is eps=8 but claims eps=1 is refuted (eps_hat > 1)."""
    rng = np.random.default_rng(3)
    sigma = gaussian_mechanism_sigma(8.0, DELTA)
    sx, sy = simulate_gaussian_scores(sigma, 1024, 32, 10**5, rng)
    grid = np.quantile(sy, 1 - np.geomspace(0.5, 1e-4, 40))
    cert = certify_split(sx, sy, grid, DELTA, rng, level=0.05)
    assert cert.epsilon_lower_bound > 1.0
