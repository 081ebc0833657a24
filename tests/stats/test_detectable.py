"""The smallest true ε each bound detects (privaudit.stats.detectable), against simulations with known truth.

What is checked:

* the exact binomial power is right: at the returned ε', the *oracle-threshold* audit (scores drawn
  from the true member, τ at the oracle FPR, the real Clopper-Pearson certification and the real
  ``refute_point``) refutes the claim in power ± 3 s.e. of the simulations; the same for the one-run
  bound at r = m guesses and for Game 3;
* the idealisation is in the auditor's favour: the real ``certify_claim_scores`` (τ tuned on 20 % of
  the runs) and the real one-run ``bounds_from_losses`` (Bonferroni grid) refute at most as often;
  clearly below ε' (halfway between the claim and ε') they refute less often than ``power``;
* monotonicity (hypothesis) and a table of regression values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from privaudit.stats.claim_runs import certify_claim_scores
from privaudit.stats.detectable import (
    detectable_epsilon_blackbox,
    detectable_epsilon_game3,
    detectable_epsilon_one_run,
    power_blackbox,
    power_one_run,
)
from privaudit.stats.fdp_one_run import gdp_epsilon
from privaudit.stats.game3 import game3_epsilon
from privaudit.stats.gdp_runs import certify_threshold_runs
from privaudit.stats.one_run import one_run_epsilon_lower_bound
from privaudit.stats.tradeoff import EpsDeltaFamily, GaussianFamily, LaplaceFamily, refute_point

DELTA = 1e-5
MU1 = optimize.brentq(lambda m: gdp_epsilon(m, DELTA) - 1.0, 1e-3, 10.0)  # μ-GDP with ε = 1 at δ = 1e-5
GAUSS, LAPLACE, POLY = GaussianFamily(MU1), LaplaceFamily(1.0), EpsDeltaFamily(1.0, DELTA)
POWER = 0.8


def _mu(eps: float) -> float:
    return float(optimize.brentq(lambda m: gdp_epsilon(m, DELTA) - eps, 1e-6, 40.0))


def _laplace_theta(eps: float) -> float:
    return eps - 2.0 * math.log1p(-DELTA)  # inverse of LaplaceFamily.epsilon


def _three_se(p: float, reps: int) -> float:
    return 3.0 * math.sqrt(p * (1.0 - p) / reps)


# (family, θ of the true member at ε, draw (s_in, s_out) of that member, the out-score quantile at FPR α)
CASES = {
    "gaussian": (GAUSS, _mu, lambda rng, th, n: (rng.normal(th, 1.0, n), rng.normal(0.0, 1.0, n)),
                 lambda a: float(stats.norm.isf(a))),
    "laplace": (LAPLACE, _laplace_theta, lambda rng, th, n: (rng.laplace(th, 1.0, n), rng.laplace(0.0, 1.0, n)),
                lambda a: float(stats.laplace.isf(a))),
}


# ----------------------------------------------------------------------------------- black-box
SIZES = [320, pytest.param(2000, marks=pytest.mark.slow)]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", ["gaussian", "laplace"])
def test_blackbox_oracle_threshold_simulation_matches_exact_power(name: str, n: int) -> None:
    """At ε' the ideal audit (oracle τ, the real certification and refute_point) refutes w.p. ≈ 0.8."""
    fam, theta_of, draw, isf = CASES[name]
    level, tf, reps = 0.05, 0.2, 400
    kw = dict(claimed_epsilon=1.0, n_in=n, n_out=n, tune_fraction=tf, level=level, delta=DELTA)
    eps = detectable_epsilon_blackbox(fam, **kw)
    th = theta_of(eps)
    oracle = power_blackbox(fam, th, **kw)
    assert oracle.power == pytest.approx(POWER, abs=2e-3)
    tau = isf(oracle.fpr)
    c = n - int(n * tf)  # certification runs per side
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(reps):
        s_in, s_out = draw(rng, th, c)
        cert = certify_threshold_runs(s_in, s_out, tau, level=level, delta=DELTA)
        hits += refute_point(fam, cert.fpr_upper, cert.fnr_upper, DELTA).epsilon > 1.0
    assert abs(hits / reps - POWER) <= _three_se(POWER, reps), (eps, hits / reps)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", ["gaussian", "laplace"])
def test_blackbox_real_audit_detects_no_more_than_the_ideal(name: str, n: int) -> None:
    """certify_claim_scores itself (τ tuned on 20 % of the runs): at ε' its refutation rate is at most
    power (+3 s.e.); halfway between the claim and ε' it is below power."""
    fam, theta_of, draw, _ = CASES[name]
    level, tf, reps = 0.05, 0.2, 200
    eps = detectable_epsilon_blackbox(fam, claimed_epsilon=1.0, n_in=n, n_out=n, tune_fraction=tf, level=level,
                                      delta=DELTA)
    rng = np.random.default_rng(11)
    rates = {}
    for e in (eps, 0.5 * (1.0 + eps)):
        th = theta_of(e)
        hits = 0
        for _ in range(reps):
            s_in, s_out = draw(rng, th, n)
            b = certify_claim_scores(s_in, s_out, fam, tune_fraction=tf, level=level, delta=DELTA)
            hits += b.eps_lower_bound > 1.0
        rates[e] = hits / reps
    assert rates[eps] <= POWER + _three_se(POWER, reps), rates
    assert rates[0.5 * (1.0 + eps)] < POWER, rates


def test_blackbox_real_gaussian_audit_reaches_power_a_little_above_the_ideal_threshold() -> None:
    """The ideal is not vacuous: for a Gaussian claim the real audit reaches power at 1.5 × (ε' − claim)."""
    n, level, reps = 320, 0.05, 200
    eps = detectable_epsilon_blackbox(GAUSS, claimed_epsilon=1.0, n_in=n, n_out=n, tune_fraction=0.2, level=level,
                                      delta=DELTA)
    th = _mu(1.0 + 1.5 * (eps - 1.0))
    rng = np.random.default_rng(3)
    hits = sum(certify_claim_scores(rng.normal(th, 1.0, n), rng.normal(0.0, 1.0, n), GAUSS, tune_fraction=0.2,
                                    level=level, delta=DELTA).eps_lower_bound > 1.0 for _ in range(reps))
    assert hits / reps >= POWER - _three_se(POWER, reps)


@settings(max_examples=5, deadline=None)
@given(fam=st.sampled_from([GAUSS, LAPLACE, POLY]), n=st.integers(40, 500),
       level=st.sampled_from([0.1, 0.05, 0.01]))
def test_blackbox_monotone_in_runs_and_level(fam, n: int, level: float) -> None:  # type: ignore[no-untyped-def]
    kw = dict(claimed_epsilon=1.0, tune_fraction=0.2, delta=DELTA)
    e = detectable_epsilon_blackbox(fam, n_in=n, n_out=n, level=level, **kw)
    assert e >= 1.0
    more = detectable_epsilon_blackbox(fam, n_in=2 * n, n_out=2 * n, level=level, **kw)
    assert more <= e
    stricter = detectable_epsilon_blackbox(fam, n_in=n, n_out=n, level=level / 5.0, **kw)
    assert stricter >= e


#: ε' detected with power 0.8, claim ε = 1 at δ = 1e-5 (Gaussian: μ-GDP with ε(μ, δ) = 1, μ ≈ 0.268;
#: Laplace: ε₀ = 1; polygon: the (1, 1e-5) curve), tune_fraction 0.2, computed by
#: detectable_epsilon_blackbox (exact binomial power, 74-point oracle FPR grid and its mirror, each refined
#: twice around its best point, bisection to 1e-4 relative in θ); a 2000-point grid moves none by > 3e-4
BLACKBOX_TABLE = {
    ("eps_delta", 320, 0.05): 1.3558, ("eps_delta", 320, 0.01): 1.4558,
    ("eps_delta", 2000, 0.05): 1.1351, ("eps_delta", 2000, 0.01): 1.1717,
    ("gaussian", 320, 0.05): 2.8388, ("gaussian", 320, 0.01): 3.2842,
    ("gaussian", 2000, 0.05): 1.6887, ("gaussian", 2000, 0.01): 1.8575,
    ("laplace", 320, 0.05): 1.5482, ("laplace", 320, 0.01): 1.6923,
    ("laplace", 2000, 0.05): 1.2029, ("laplace", 2000, 0.01): 1.2540,
}


@pytest.mark.parametrize("key", sorted(BLACKBOX_TABLE))
def test_blackbox_regression_table(key: tuple[str, int, float]) -> None:
    fam = {"eps_delta": POLY, "gaussian": GAUSS, "laplace": LAPLACE}[key[0]]
    e = detectable_epsilon_blackbox(fam, claimed_epsilon=1.0, n_in=key[1], n_out=key[1], tune_fraction=0.2,
                                    level=key[2], delta=DELTA)
    assert e == pytest.approx(BLACKBOX_TABLE[key], rel=2e-3)


def test_blackbox_true_family_polygon_refutes_a_gaussian_claim_below_its_epsilon() -> None:
    """The true mechanism need not be of the claim's family: a polygon-shaped (ε', δ)-DP mechanism is caught
    breaking a Gaussian (declared-curve) claim of ε = 1 even at ε' < 1 — its middle corner lies below G_μ —
    and is detected at a smaller ε than a Gaussian mechanism is."""
    kw = dict(claimed_epsilon=1.0, n_in=320, n_out=320, tune_fraction=0.2, level=0.05, delta=DELTA)
    own = detectable_epsilon_blackbox(GAUSS, **kw)
    poly = detectable_epsilon_blackbox(GAUSS, true_family=EpsDeltaFamily(1.0, DELTA), **kw)
    assert 0.0 < poly < 1.0 < own
    # against the polygon claim itself a polygon is never detected below the claim
    assert detectable_epsilon_blackbox(POLY, true_family=EpsDeltaFamily(1.0, DELTA), **kw) >= 1.0


def test_blackbox_validation() -> None:
    kw = dict(claimed_epsilon=1.0, n_in=320, n_out=320, tune_fraction=0.2, level=0.05, delta=DELTA)
    with pytest.raises(ValueError, match="power"):
        detectable_epsilon_blackbox(GAUSS, **kw, power=1.0)
    with pytest.raises(ValueError, match="level"):
        detectable_epsilon_blackbox(GAUSS, **{**kw, "level": 0.0})
    with pytest.raises(ValueError, match="n_in"):
        detectable_epsilon_blackbox(GAUSS, **{**kw, "n_in": 1})
    with pytest.raises(ValueError, match="tune_fraction"):
        detectable_epsilon_blackbox(GAUSS, **{**kw, "tune_fraction": 1.5})
    with pytest.raises(ValueError, match="claimed_epsilon"):
        detectable_epsilon_blackbox(GAUSS, **{**kw, "claimed_epsilon": -1.0})
    with pytest.raises(ValueError, match="above claimed_epsilon"):  # μ = 1 is ε ≈ 4.4 at 1e-5: cannot carry ε = 1
        detectable_epsilon_blackbox(GaussianFamily(1.0), **kw)
    with pytest.raises(ValueError, match="family"):
        detectable_epsilon_blackbox("gaussian", **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="eps_max"):
        detectable_epsilon_blackbox(GAUSS, **kw, eps_max=0.5)


# ------------------------------------------------------------------------------------- one run
def _rr_bits(rng: np.random.Generator, eps: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Inclusion bits S ~ Bern(1/2) and ε-randomized response of them (the ideal ε-DP one-run output)."""
    s = rng.random(m) < 0.5
    keep = rng.random(m) < 1.0 / (1.0 + math.exp(-eps))
    return s, np.where(keep, s, ~s)


def test_one_run_simulation_matches_exact_power() -> None:
    """All m canaries guessed (the oracle's r for m ≥ 100), the real Steinke bound: rate ≈ 0.8 at ε'."""
    m, level, reps = 160, 0.05, 400
    grid = ((0.5, 0.5),)  # r = m, full level
    eps = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level, delta=DELTA, k_grid=grid)
    assert eps == pytest.approx(detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level,
                                                           delta=DELTA), rel=1e-6)
    rng = np.random.default_rng(5)
    cache: dict[int, float] = {}
    hits = 0
    for _ in range(reps):
        s, out = _rr_bits(rng, eps, m)
        v = int(np.sum(s == out))
        if v not in cache:
            cache[v] = one_run_epsilon_lower_bound(v, m, m, DELTA, level=level)
        hits += cache[v] > 1.0
    assert abs(hits / reps - POWER) <= _three_se(POWER, reps), (eps, hits / reps)


def test_one_run_real_grid_audit_detects_no_more_than_the_union_bound() -> None:
    """bounds_from_losses on the audit's (k+, k−) grid (Bonferroni), ε'-RR losses: rate ≤ 0.8 + 3 s.e. at the
    union-bound ε', and < 0.8 halfway between the claim and ε'."""
    from privaudit.audits.one_run import DEFAULT_K_GRID, bounds_from_losses

    m, level, reps = 160, 0.05, 200
    eps = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level, delta=DELTA,
                                     k_grid=DEFAULT_K_GRID)
    rng = np.random.default_rng(9)
    rates = {}
    for e in (eps, 0.5 * (1.0 + eps)):
        hits = 0
        for _ in range(reps):
            s, out = _rr_bits(rng, e, m)
            losses = np.where(out, -1.0, 1.0) + 1e-3 * rng.standard_normal(m)  # ties broken at random
            hits += bounds_from_losses(losses, s, delta=DELTA, level=level).eps_lower_bound > 1.0
        rates[e] = hits / reps
    assert rates[eps] <= POWER + _three_se(POWER, reps), rates
    assert rates[0.5 * (1.0 + eps)] < POWER, rates


@settings(max_examples=5, deadline=None)
@given(m=st.integers(20, 1000), level=st.sampled_from([0.1, 0.05, 0.01]))
def test_one_run_at_least_claim_and_monotone_in_level(m: int, level: float) -> None:
    e = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level, delta=DELTA)
    assert e >= 1.0
    assert detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level / 5.0, delta=DELTA) >= e


#: ε' (pure) detected with power 0.8 by the Steinke et al. bound, claim ε = 1, δ = 1e-5; oracle r
#: (detectable_epsilon_one_run, k_grid=None) and the audit's DEFAULT_K_GRID (union bound)
ONE_RUN_TABLE = {
    (100, 0.05): (1.6275, 1.6216), (100, 0.01): (1.8447, 1.8287),
    (160, 0.05): (1.4908, 1.4448), (160, 0.01): (1.6568, 1.6092),
    (1000, 0.05): (1.1845, 1.1605), (1000, 0.01): (1.2401, 1.2183),
}


@pytest.mark.parametrize("key", sorted(ONE_RUN_TABLE))
def test_one_run_regression_table(key: tuple[int, float]) -> None:
    from privaudit.audits.one_run import DEFAULT_K_GRID

    m, level = key
    oracle = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level, delta=DELTA)
    grid = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=m, level=level, delta=DELTA,
                                      k_grid=DEFAULT_K_GRID)
    assert (oracle, grid) == pytest.approx(ONE_RUN_TABLE[key], rel=2e-3)


def test_one_run_power_and_validation() -> None:
    assert power_one_run(1.0, claimed_epsilon=1.0, canaries=160, level=0.05, delta=DELTA) <= 0.05
    assert detectable_epsilon_one_run(claimed_epsilon=5.0, canaries=10, level=0.05, delta=DELTA) == math.inf
    with pytest.raises(ValueError, match="canaries"):
        detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=0, level=0.05, delta=DELTA)
    with pytest.raises(ValueError, match="k_grid"):
        detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=100, level=0.05, delta=DELTA, k_grid=((0.8, 0.8),))
    with pytest.raises(ValueError, match="delta"):
        detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=100, level=0.05, delta=1.0)


# -------------------------------------------------------------------------------------- Game 3
def test_game3_simulation_matches_exact_power() -> None:
    n, level, reps = 224, 0.05, 2000
    eps = detectable_epsilon_game3(claimed_epsilon=1.0, guesses=n, level=level)
    rng = np.random.default_rng(2)
    correct = rng.binomial(n, 1.0 / (1.0 + math.exp(-eps)), reps)  # ε'-label-RR, every canary guessed
    rate = np.mean([game3_epsilon(int(c), n, level=level)[0] > 1.0 for c in correct])
    assert abs(rate - POWER) <= _three_se(POWER, reps), (eps, rate)
    half = detectable_epsilon_game3(claimed_epsilon=1.0, guesses=n, level=level, power=0.5)
    assert 1.0 < half < eps
    with pytest.raises(ValueError, match="guesses"):
        detectable_epsilon_game3(claimed_epsilon=1.0, guesses=0, level=level)
    with pytest.raises(ValueError, match="level"):
        detectable_epsilon_game3(claimed_epsilon=1.0, guesses=n, level=0.5)
