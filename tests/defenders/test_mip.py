"""MIP noise wrapper (Izzo et al. 2023, Algorithm 1 / Corollary 8)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privaudit.defenders.mip import get_vector
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.stats import epsilon_for_mip_eta, mip_noise_scale, mip_norm


def _mip(eta: float = 0.3, base: dict | None = None, **kw):
    spec = validate_defender_spec({"name": "m", "kind": "mip", "eta": eta, "half_splits": 6,
                                   "base": base or {"kind": "logistic_regression", "randomness": "fixed"}, **kw},
                                  where="defenders[4]")
    return make_defender(spec, 10)


@pytest.fixture(scope="module")
def fitted(tiny):
    return _mip().fit(tiny.X, tiny.y, seed=4)


def test_release_is_base_plus_recorded_noise(fitted, tiny) -> None:
    m = fitted
    assert m.sigma_.shape == m.theta_.shape == m.noise_.shape == (64 * 10 + 10,)
    np.testing.assert_allclose(get_vector(m.inner), m.theta_ + m.noise_)
    base = make_defender(m.base_spec, 10).fit(tiny.X, tiny.y, seed=0)  # fixed randomness: same theta
    np.testing.assert_allclose(get_vector(base), m.theta_, rtol=1e-6, atol=1e-8)


def test_sampled_noise_norm_follows_gamma_d_b(fitted) -> None:
    """KS: ||X||_{sigma,M} of the wrapper's noise, for its estimated sigma, is Gamma(d, b)."""
    m = fitted
    d, b = m.sigma_.size, mip_noise_scale(0.3, 2)
    draws = m.draw_noise(m.sigma_, np.random.default_rng(9), size=3000)
    norms = mip_norm(draws, m.sigma_, 2)
    assert stats.kstest(norms, stats.gamma(a=d, scale=b).cdf).pvalue > 0.01
    # the test has power: the radius printed in Corollary 8 (Laplace) is rejected
    assert stats.kstest(np.abs(np.random.default_rng(9).laplace(0, b, 3000)), stats.gamma(a=d, scale=b).cdf).pvalue < 1e-6
    # and the single draw used by fit is a plausible Gamma(d, b) value
    assert stats.gamma(a=d, scale=b).cdf(mip_norm(m.noise_, m.sigma_, 2)) == pytest.approx(0.5, abs=0.4999)


def test_sigma_estimate_matches_half_split_spread(tiny) -> None:
    """sigma_j is the root mean square deviation of theta_j over the B half-split fits."""
    m = _mip(base={"kind": "torch_mlp", "hidden": [], "epochs": 2, "randomness": "fixed"})
    sigma = m.estimate_sigma(tiny.X, tiny.y, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    thetas = []
    for _ in range(6):
        idx = np.sort(rng.choice(len(tiny.y), size=len(tiny.y) // 2, replace=False))
        fit = make_defender(m.base_spec, 10).fit(tiny.X[idx], tiny.y[idx], seed=int(rng.integers(2**31 - 1)))
        thetas.append(get_vector(fit))
    np.testing.assert_allclose(sigma, np.maximum(np.std(np.stack(thetas), axis=0), 1e-8), rtol=1e-6)


def test_claims_eta_not_epsilon(fitted) -> None:
    info = fitted.describe()
    assert info["claimed_epsilon"] is None and info["mip_eta"] == 0.3
    assert info["epsilon_equivalent"] == pytest.approx(epsilon_for_mip_eta(0.3))
    assert info["noise_scale_b"] == pytest.approx((6.16 / 0.3) ** 2)


@pytest.mark.parametrize("base,match", [
    ({"kind": "sklearn", "estimator": "knn"}, "base.estimator 'knn' has no parameter vector"),
    ({"kind": "pate", "epsilon": 1.0}, "base.kind 'pate' has no parameter vector"),
    ({"kind": "dp_sgd"}, r"base\.epsilon"),
])
def test_base_is_validated(base: dict, match: str) -> None:
    with pytest.raises(ValueError, match=r"defenders\[4\]\.base") as err:
        _mip(base=base)
    assert err.match(match)
