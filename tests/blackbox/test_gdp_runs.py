"""privaudit.stats.gdp_runs: golden numbers, properties, and simulations with known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privaudit.stats.fdp_one_run import gdp_epsilon, gdp_mu
from privaudit.stats.gdp_runs import (
    certify_threshold_runs,
    gdp_mu_from_rates,
    last_iterate_epsilon,
    rate_epsilon,
    select_threshold_runs,
)
from privaudit.testing.blackbox_runs import certify_scores


# --- golden numbers -----------------------------------------------------------------------------

def test_gdp_mu_golden() -> None:
    a = stats.norm.cdf(-0.5)
    assert gdp_mu_from_rates(a, a) == pytest.approx(1.0, abs=1e-9)
    assert gdp_mu_from_rates(0.05, stats.norm.cdf(1.6448536269514722 - 2.0)) == pytest.approx(2.0, abs=1e-9)
    assert gdp_mu_from_rates(0.7, 0.7) == 0.0


def test_rate_epsilon_golden() -> None:
    assert rate_epsilon(0.1, 0.5, 0.0) == pytest.approx(math.log(5.0))
    assert rate_epsilon(0.5, 0.1, 0.0) == pytest.approx(math.log(5.0))
    assert rate_epsilon(0.0, 0.5, 1e-5) == math.inf
    assert rate_epsilon(0.6, 0.6, 1e-5) == 0.0


def test_last_iterate_default_head_golden() -> None:
    # params.yaml dpsgd head on the 898-row digits Defender half: q = 64/898, T = 20 * 14 = 280
    c = last_iterate_epsilon(4.6484375, 64 / 898, 280, 1e-5)
    assert c.mu == pytest.approx(64 / 898 * math.sqrt(280) / 4.6484375)
    assert round(c.mu, 3) == 0.257
    assert c.eps_gdp == pytest.approx(gdp_epsilon(c.mu, 1e-5))
    assert 0.95 <= c.eps_exact <= 1.0  # the exact mixture is a bit less private than its mean-shift GDP


def test_last_iterate_full_batch_is_exactly_gaussian() -> None:
    # q = 1: Binomial(T, 1) = T, the pair is N(0, Tσ²) vs N(T, Tσ²): exactly μ-GDP with μ = √T/σ
    c = last_iterate_epsilon(8.0, 1.0, 16, 1e-5)
    assert c.mu == pytest.approx(0.5)
    assert c.eps_exact == pytest.approx(gdp_epsilon(0.5, 1e-5), abs=1e-6)


def test_last_iterate_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="noise_multiplier"):
        last_iterate_epsilon(0.0, 0.1, 10, 1e-5)
    with pytest.raises(ValueError, match="steps"):
        last_iterate_epsilon(1.0, 0.1, 0, 1e-5)


def test_bad_scores_rejected() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        certify_threshold_runs([1.0, np.inf], [0.0, 1.0], 0.5, level=0.05)
    with pytest.raises(ValueError, match="empty"):
        certify_threshold_runs([], [0.0], 0.5, level=0.05)
    with pytest.raises(ValueError, match="objective"):
        select_threshold_runs([1.0], [0.0], objective="best", level=0.05)


# --- properties ---------------------------------------------------------------------------------

rates = st.floats(0.0, 1.0, allow_nan=False)


@given(rates, rates)
def test_gdp_mu_symmetric_and_nonnegative(a: float, b: float) -> None:
    assert gdp_mu_from_rates(a, b) >= 0.0
    assert gdp_mu_from_rates(a, b) == pytest.approx(gdp_mu_from_rates(b, a), abs=1e-9)


@given(st.floats(0.001, 0.999), st.floats(0.001, 0.999), st.floats(0.0, 0.2))
def test_gdp_mu_decreases_with_rates(a: float, b: float, h: float) -> None:
    a2 = min(0.999, a + h)
    assert gdp_mu_from_rates(a2, b) <= gdp_mu_from_rates(a, b) + 1e-12


@given(st.integers(0, 60), st.integers(0, 60), st.integers(60, 200), st.integers(60, 200))
@settings(max_examples=60, deadline=None)
def test_certified_bound_below_point_and_gdp_above_rate(fp: int, fn: int, n_out: int, n_in: int) -> None:
    s_out = np.r_[np.ones(fp), np.zeros(n_out - fp)]  # fp of them above τ = 0.5
    s_in = np.r_[np.zeros(fn), np.ones(n_in - fn)]
    b = certify_threshold_runs(s_in, s_out, 0.5, level=0.05)
    assert b.false_positives == fp and b.false_negatives == fn
    assert b.fpr_upper >= fp / n_out and b.fnr_upper >= fn / n_in
    assert b.mu_lower_bound <= b.mu_point + 1e-12
    # a μ-GDP curve through a point lies below the (ε, δ) region of the same point's ε at δ → 0:
    # the GDP view never certifies less than the assumption-free bound
    assert b.eps_lower_bound_gdp >= b.eps_lower_bound_rate - 1e-9


# --- simulations with known truth ---------------------------------------------------------------

def _overclaims(mu: float, n: int, reps: int, seed: int) -> tuple[int, int, int]:
    rng = np.random.default_rng(seed)
    eps_true = gdp_epsilon(mu, 1e-5) if mu > 0 else 0.0
    over_mu = over_eps = over_rate = 0
    for _ in range(reps):
        g, r, _, _ = certify_scores(rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n), tune_fraction=0.2,
                                    level=0.05, delta=1e-5)
        over_mu += g.mu_lower_bound > mu
        over_eps += g.eps_lower_bound_gdp > eps_true + 1e-9
        over_rate += r.eps_lower_bound_rate > eps_true + 1e-9
    return over_mu, over_eps, over_rate


@pytest.mark.parametrize("mu", [0.0, 0.27, 1.0])
def test_gaussian_mechanism_never_overclaimed_beyond_level(mu: float) -> None:
    """Gaussian mechanism with known μ (ε at 1e-5 = gdp_epsilon(μ)): 300 audits of 200 runs per side;
    a bound above the truth must happen in at most level = 5 % of them (binomial slack: ≤ 25 of 300,
    P(Bin(300, 0.05) > 25) ≈ 0.04)."""
    over_mu, over_eps, over_rate = _overclaims(mu, 200, 300, seed=int(mu * 100) + 1)
    assert over_mu <= 25 and over_eps <= 25 and over_rate <= 25


def test_last_iterate_mixture_never_overclaimed_beyond_level() -> None:
    """The heuristic's own pair (N(0, Tσ²) vs Binomial(T, q) + N(0, Tσ²)) for the digits head at ε = 1:
    the GDP-view bound above the pair's exact ε in at most 5 % of 300 audits (≤ 25)."""
    sigma, q, T = 4.6484375, 64 / 898, 280
    c = last_iterate_epsilon(sigma, q, T, 1e-5)
    rng = np.random.default_rng(7)
    s = sigma * math.sqrt(T)
    over = 0
    for _ in range(300):
        si = rng.binomial(T, q, 400) + rng.normal(0, s, 400)
        so = rng.normal(0, s, 400)
        g, _, _, _ = certify_scores(si, so, tune_fraction=0.2, level=0.05, delta=1e-5)
        over += g.eps_lower_bound_gdp > c.eps_exact
    assert over <= 25


def test_power_on_gaussian_mechanism() -> None:
    """Not vacuous: μ = 1, 4,000 runs per side certify μ_L ≥ 0.85 (ε̂ ≥ 3.5 of the true 4.38)."""
    rng = np.random.default_rng(3)
    g, r, _, _ = certify_scores(rng.normal(1.0, 1, 4000), rng.normal(0, 1, 4000), tune_fraction=0.2, level=0.05,
                                delta=1e-5)
    assert 0.85 <= g.mu_lower_bound <= 1.0
    assert g.eps_lower_bound_gdp >= 3.5 and 0 < r.eps_lower_bound_rate < g.eps_lower_bound_gdp
    assert gdp_mu(g.eps_lower_bound_gdp, 1e-5) == pytest.approx(g.mu_lower_bound, abs=1e-6)


def test_last_iterate_small_sigma_no_lower_root() -> None:
    """σ/4 of the ε = 4 head (σ = 0.385): e^-ε falls below (1 − q)^T, the P‖Q region is empty;
    regression for a root search that ran to −inf."""
    c = last_iterate_epsilon(1.538 / 4, 64 / 898, 280, 1e-5)
    assert math.isfinite(c.eps_exact) and c.eps_exact >= c.eps_gdp > 17.0
