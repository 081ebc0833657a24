"""The one-run f-DP test against a claim's own family (issue 33, :mod:`privaudit.stats.fdp_claim_one_run`).

Golden: with the (ε, δ) family it is the published (ε, δ)-curve bound, with the Gaussian family the μ-GDP
bound converted by Dong et al. Cor. 2.13 (both in :mod:`privaudit.stats.fdp_one_run`). Property: a count
that does not reject the claim's member never reports more than the claim's ε. Simulation: honest
Laplace-mechanism canaries (pure ε-DP per canary) rejected at most at the level.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.stats.fdp_claim_one_run import fdp_one_run_family_bound
from privaudit.stats.fdp_one_run import fdp_one_run_epsilon_lower_bound, fdp_one_run_mu_lower_bound, gdp_epsilon
from privaudit.stats.tradeoff import EpsDeltaFamily, GaussianFamily, LaplaceFamily


@pytest.mark.parametrize("c,k,m", [(100, 100, 100), (90, 100, 1000), (60, 80, 500), (30, 40, 200)])
def test_polygon_family_is_the_eps_delta_curve_bound(c: int, k: int, m: int) -> None:
    want = fdp_one_run_epsilon_lower_bound(c, k, m, 1e-5, level=0.05, curve="eps_delta")
    _, got, _ = fdp_one_run_family_bound(c, k, m, 1e-5, EpsDeltaFamily(float("inf"), 1e-5), level=0.05)
    assert got == pytest.approx(want, rel=2e-3, abs=2e-4)


@pytest.mark.parametrize("c,k,m", [(100, 100, 100), (90, 100, 1000), (60, 80, 500)])
def test_gaussian_family_is_the_gdp_bound(c: int, k: int, m: int) -> None:
    mu = fdp_one_run_mu_lower_bound(c, k, m, level=0.05)
    theta, got, _ = fdp_one_run_family_bound(c, k, m, 1e-5, GaussianFamily(10.0), level=0.05)
    assert theta == pytest.approx(mu, rel=2e-3, abs=1e-4)
    assert got == pytest.approx(gdp_epsilon(mu, 1e-5), rel=5e-3, abs=1e-3)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(10, 120), frac=st.floats(0.5, 1.0), claim=st.floats(0.1, 4.0))
def test_not_rejecting_the_claim_never_reports_more_than_it(k: int, frac: float, claim: float) -> None:
    c = int(round(frac * k))
    fam = LaplaceFamily(claim)
    _, eps, rejected = fdp_one_run_family_bound(c, k, 400, 0.0, fam, level=0.05)
    if rejected:
        assert eps >= fam.epsilon(claim, 0.0) - 1e-9
    else:
        assert eps <= fam.epsilon(claim, 0.0) + 1e-9


def test_honest_laplace_canaries_are_rejected_at_most_at_the_level() -> None:
    """m canaries, each in w.p. 1/2; the mechanism releases x_j = b_j + Lap(1/ε) per canary (pure ε-DP
    per canary); the auditor guesses "in" for the k+ largest and "out" for the k- smallest."""
    rng = np.random.default_rng(4)
    eps, m, audits, level = 1.0, 400, 150, 0.05
    rejected = {1.0: 0, 0.3: 0}  # the honest claim, and one 3x too small (must be caught: the test can fail)
    for _ in range(audits):
        bits = rng.random(m) < 0.5
        x = bits + rng.laplace(0.0, 1.0 / eps, m)
        order = np.argsort(x)
        guess_in, guess_out = order[-60:], order[:60]
        correct = int(bits[guess_in].sum() + (~bits[guess_out]).sum())
        for claim in rejected:
            rejected[claim] += fdp_one_run_family_bound(correct, 120, m, 0.0, LaplaceFamily(claim), level=level)[2]
    assert rejected[1.0] <= level * audits + 3 * np.sqrt(level * (1 - level) * audits), rejected
    assert rejected[0.3] >= 0.8 * audits, rejected
