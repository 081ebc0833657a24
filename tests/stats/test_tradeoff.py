"""privaudit.stats.tradeoff (+ claim_runs): golden curves, properties, and simulations with known truth.

The rule every gated bound must keep: for an honest mechanism satisfying the claim, the audit refutes
the claim in at most ``level`` of audits (binomial slack 3 s.e.). The simulations draw scores from
exact honest mechanisms (Laplace, Gaussian, randomized response) and run the production statistic
:func:`privaudit.stats.claim_runs.certify_claim_scores` on each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma
from privaudit.stats.claim_runs import certify_claim_scores
from privaudit.stats.fdp_one_run import gdp_delta, gdp_epsilon
from privaudit.stats.gdp_runs import certify_scores, rate_epsilon
from privaudit.stats.tradeoff import (
    EpsDeltaFamily,
    GaussianFamily,
    LaplaceFamily,
    RandomizedResponseFamily,
    SubsampledGaussianFamily,
    TradeoffFamily,
    laplace_tradeoff,
    profile_tradeoff,
    refute_point,
)

LEVEL = 0.05
RUNS = 320  # per side: params.yaml blackbox.sequential_runs
TUNE = 0.2  # params.yaml blackbox.tune_fraction
AUDITS = 200


def _limit(n: int, level: float = LEVEL) -> float:
    """Most false alarms an honest mechanism may show in n audits: level·n + 3 s.e."""
    return level * n + 3.0 * math.sqrt(level * (1.0 - level) * n)


# --- golden numbers -----------------------------------------------------------------------------

@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5])
def test_laplace_curve_pieces(mu: float) -> None:
    em = math.exp(-mu)
    a1 = np.linspace(0.0, em / 2, 7)
    a2 = np.linspace(em / 2, 0.5, 7)[1:]
    a3 = np.linspace(0.5, 1.0, 7)
    assert laplace_tradeoff(mu, a1) == pytest.approx(1.0 - math.exp(mu) * a1, abs=1e-12)
    assert laplace_tradeoff(mu, a2) == pytest.approx(em / (4.0 * a2), abs=1e-12)
    assert laplace_tradeoff(mu, a3) == pytest.approx(em * (1.0 - a3), abs=1e-12)
    assert LaplaceFamily(mu).curve(mu, a2) == pytest.approx(em / (4.0 * a2), abs=1e-12)


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_laplace_curve_is_the_threshold_test_of_the_pair(mu: float) -> None:
    """Lap(0,1) vs Lap(mu,1), reject for x > t: (P(X > t), Q(X <= t)) lies on the curve for every t."""
    t = np.linspace(-4.0, mu + 4.0, 41)
    alpha = stats.laplace.sf(t, 0.0, 1.0)
    beta = stats.laplace.cdf(t, mu, 1.0)
    assert laplace_tradeoff(mu, alpha) == pytest.approx(beta, abs=1e-12)


@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-2, 0.1])
def test_laplace_epsilon_matches_hockey_stick(eps0: float, delta: float) -> None:
    """ε(ε₀, δ) = ε₀ + 2 log(1 − δ) is where the hockey-stick divergence of the pair equals δ."""
    eps = LaplaceFamily(eps0).epsilon(eps0, delta)

    def hs(e: float) -> float:
        f = lambda x: max(0.0, 0.5 * math.exp(-abs(x - eps0)) - math.exp(e) * 0.5 * math.exp(-abs(x)))  # noqa: E731
        return integrate.quad(f, -60, 60, points=[0.0, (e + eps0) / 2, eps0], limit=400, epsabs=1e-15, epsrel=1e-12)[0]

    assert hs(eps) == pytest.approx(delta, rel=1e-6)
    assert LaplaceFamily(eps0).epsilon(eps0, 0.0) == eps0


def test_gaussian_golden() -> None:
    assert float(GaussianFamily(1.0).curve(1.0, 0.5)) == pytest.approx(stats.norm.cdf(-1.0), abs=1e-12)
    assert float(GaussianFamily(1.0).curve(1.0, 0.05)) == pytest.approx(stats.norm.cdf(stats.norm.isf(0.05) - 1))
    assert GaussianFamily(1.0).epsilon(1.0, 1e-5) == pytest.approx(gdp_epsilon(1.0, 1e-5))
    assert GaussianFamily(1.0).epsilon(1.0, 0.0) == math.inf
    assert GaussianFamily(1.0).curve(0.0, [0.2, 0.7]) == pytest.approx([0.8, 0.3])


def test_polygon_golden() -> None:
    f = EpsDeltaFamily(1.0, 1e-3)
    e = math.e
    assert float(f.curve(1.0, 0.1)) == pytest.approx(1 - 1e-3 - e * 0.1)
    assert float(f.curve(1.0, 0.5)) == pytest.approx((1 - 1e-3 - 0.5) / e)
    assert float(f.curve(1.0, 0.0)) == pytest.approx(1 - 1e-3)
    assert float(f.curve(1.0, 1.0)) == 0.0
    # the kink at α = (1 − δ)/(1 + e^ε), where both lines meet the diagonal's reflection
    k = (1 - 1e-3) / (1 + e)
    assert float(f.curve(1.0, k)) == pytest.approx(k, abs=1e-12)
    assert f.epsilon(1.0, 1e-3) == 1.0


def test_randomized_response_k2_is_the_pure_polygon() -> None:
    a = np.linspace(0, 1, 101)
    for eps in (0.3, 1.0, 3.0):
        assert RandomizedResponseFamily(eps, 2).curve(eps, a) == pytest.approx(
            EpsDeltaFamily(eps, 0.0).curve(eps, a), abs=1e-12)


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_randomized_response_k10_above_polygon_through_its_vertex(eps: float) -> None:
    rr = RandomizedResponseFamily(eps, 10)
    p, r = math.exp(eps) / (math.exp(eps) + 9), 1 / (math.exp(eps) + 9)
    a = np.linspace(0, 1, 401)
    assert np.all(rr.curve(eps, a) >= EpsDeltaFamily(eps, 0.0).curve(eps, a) - 1e-12)
    assert np.any(rr.curve(eps, a) > EpsDeltaFamily(eps, 0.0).curve(eps, a) + 1e-3)  # strictly above somewhere
    assert float(rr.curve(eps, r)) == pytest.approx(1 - p, abs=1e-12)
    assert float(rr.curve(eps, 9 * r)) == pytest.approx(r, abs=1e-12)
    # its profile δ(ε') = (e^ε − e^ε')/(e^ε + k − 1): ε at δ inverts it; pure ε at δ = 0
    assert rr.epsilon(eps, 0.0) == pytest.approx(eps)
    for e2 in (0.0, eps / 2):
        d = (math.exp(eps) - math.exp(e2)) / (math.exp(eps) + 9)
        assert rr.epsilon(eps, d) == pytest.approx(e2, abs=1e-9)


def test_subsampled_gaussian_full_batch_one_step_is_gaussian() -> None:
    sigma = 1.3
    sg = SubsampledGaussianFamily(1 / sigma, sample_rate=1.0, steps=1)
    g = GaussianFamily(1 / sigma)
    a = np.linspace(0, 1, 1001)
    assert np.max(np.abs(sg.curve(1 / sigma, a) - g.curve(1 / sigma, a))) < 1e-2
    assert np.all(sg.curve(1 / sigma, a) <= g.curve(1 / sigma, a) + 1e-6)  # pessimistic: a lower curve
    assert sg.epsilon(1 / sigma, 1e-5) == pytest.approx(g.epsilon(1 / sigma, 1e-5), rel=0.01)


def test_subsampled_gaussian_digits_recipe_epsilon() -> None:
    """The digits DP-SGD head (σ = 4.6484375, q = 64/899, T = 280): PLD ε ≈ 0.986 (opacus PRV: 0.994)."""
    sg = SubsampledGaussianFamily(1 / 4.6484375, sample_rate=64 / 899, steps=280)
    assert sg.epsilon(sg.theta_claim, 1e-5) == pytest.approx(0.9857, abs=0.01)


def test_refute_point_golden() -> None:
    r = refute_point(EpsDeltaFamily(1.0, 1e-5), 0.05, 0.5, 1e-5)
    assert r.refutes_claim and r.epsilon == pytest.approx(math.log((1 - 1e-5 - 0.5) / 0.05))
    # a point just below G_1 (FPR = FNR = Φ(−1/2) − 1e-4): θ* ≈ 1, refutes a claim of μ = 0.8, not μ = 1.2
    a = stats.norm.cdf(-0.5)
    r = refute_point(GaussianFamily(0.8), a - 1e-4, a - 1e-4, 1e-5)
    assert r.refutes_claim and r.theta == pytest.approx(1.0, abs=1e-3)
    assert r.epsilon == pytest.approx(gdp_epsilon(r.theta, 1e-5))
    r = refute_point(GaussianFamily(1.2), a - 1e-4, a - 1e-4, 1e-5)
    assert not r.refutes_claim and r.theta == pytest.approx(1.0, abs=1e-3)
    assert refute_point(LaplaceFamily(1.0), 0.6, 0.6, 0.0).epsilon == 0.0


# --- properties ---------------------------------------------------------------------------------

def _family(kind: str, theta: float) -> TradeoffFamily:
    if kind == "eps_delta":
        return EpsDeltaFamily(theta, 1e-5)
    if kind == "gaussian":
        return GaussianFamily(theta)
    if kind == "laplace":
        return LaplaceFamily(theta)
    if kind == "rr10":
        return RandomizedResponseFamily(theta, 10)
    return RandomizedResponseFamily(theta, 2)


KINDS = st.sampled_from(["eps_delta", "gaussian", "laplace", "rr10", "rr2"])
THETA = st.floats(0.0, 6.0, allow_nan=False)
ALPHAS = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=20)


@given(KINDS, THETA, ALPHAS)
@settings(max_examples=300, deadline=None)
def test_curve_in_unit_interval_and_non_increasing(kind: str, theta: float, alphas: list[float]) -> None:
    f = _family(kind, theta)
    a = np.sort(np.asarray(alphas))
    y = f.curve(theta, a)
    assert np.all((y >= 0.0) & (y <= 1.0))
    assert np.all(np.diff(y) <= 1e-12)
    assert np.all(y <= 1.0 - a + 1e-12)  # below the diagonal: no curve is more private than θ = 0


@given(KINDS, st.floats(0.0, 4.0, allow_nan=False), ALPHAS)
@settings(max_examples=300, deadline=None)
def test_curve_symmetric(kind: str, theta: float, alphas: list[float]) -> None:
    """f = f⁻¹: the reflected graph point (f(α), α) lies on the curve: f(f(α)) ≤ α always, and = α
    wherever α ≤ f(0) (beyond, f(α) = 0 and f(0) = 1 − δ < α for the polygon). The Gaussian is only
    tested up to θ = 4 (see test_gaussian_curve_at_tiny_alpha)."""
    f = _family(kind, theta)
    a = np.asarray(alphas)
    ff = f.curve(theta, f.curve(theta, a))
    assert np.all(ff <= a + 1e-9)
    f0 = float(f.curve(theta, 0.0))
    assert np.all(ff[a <= f0] >= a[a <= f0] - 1e-6)


@given(KINDS, THETA, THETA, ALPHAS)
@settings(max_examples=300, deadline=None)
def test_curve_non_increasing_in_theta(kind: str, t1: float, t2: float, alphas: list[float]) -> None:
    lo, hi = min(t1, t2), max(t1, t2)
    f = _family(kind, lo)
    a = np.asarray(alphas)
    assert np.all(f.curve(hi, a) <= f.curve(lo, a) + 1e-12)


@given(KINDS, THETA)
@settings(max_examples=100, deadline=None)
def test_epsilon_non_decreasing_in_theta(kind: str, theta: float) -> None:
    f = _family(kind, theta)
    for d in (0.0, 1e-5, 1e-2):
        e1, e2 = f.epsilon(theta, d), f.epsilon(theta * 1.1 + 0.01, d)
        assert e2 >= e1 - 1e-12


RATE = st.floats(0.0, 1.0, allow_nan=False)


@given(RATE, RATE, st.sampled_from([0.0, 1e-5, 1e-2]))
@settings(max_examples=300, deadline=None)
def test_polygon_theta_star_is_rate_epsilon(fpr: float, fnr: float, delta: float) -> None:
    assert EpsDeltaFamily(1.0, delta).theta_star(fpr, fnr) == rate_epsilon(fpr, fnr, delta)


@given(KINDS, st.floats(0.01, 5.0), st.floats(0.001, 1.0), st.floats(0.001, 1.0),
       st.sampled_from([0.0, 1e-5, 1e-2]))
@settings(max_examples=300, deadline=None)
def test_refute_point_consistent_with_claim(kind: str, theta: float, fpr: float, fnr: float, delta: float) -> None:
    f = _family(kind, theta)
    if kind == "eps_delta":
        f = EpsDeltaFamily(theta, delta)  # the claim's own δ
    r = refute_point(f, fpr, fnr, delta)
    own = f.epsilon(theta, delta)
    assert r.refutes_claim == f.refutes(fpr, fnr)
    if r.refutes_claim:
        assert r.epsilon >= own - 1e-9 and r.theta >= theta
    else:
        assert r.epsilon <= own + 1e-9 and r.theta <= theta
    # the unclamped θ* agrees with the verdict: members clearly below θ* are refuted, clearly above are not
    ts = f.theta_star(fpr, fnr)
    if math.isfinite(ts) and ts > 0:
        assert f.refutes(fpr, fnr, ts * (1 - 1e-6) - 1e-9)
        assert not f.refutes(fpr, fnr, ts * (1 + 1e-6) + 1e-9)
    if r.refutes_claim:
        assert ts >= theta - 1e-6
    else:
        assert ts <= theta + 1e-6


@given(st.floats(0.1, 3.0), ALPHAS)
@settings(max_examples=100, deadline=None)
def test_profile_tradeoff_of_gaussian_profile(mu: float, alphas: list[float]) -> None:
    """(P) on a grid of the exact GDP profile is a lower bound of G_μ, within 0.01 of it."""
    eps = np.linspace(0.0, 12.0, 241)
    d = np.array([gdp_delta(e, mu) for e in eps])
    a = np.asarray(alphas)
    p = profile_tradeoff(eps, d, a)
    g = GaussianFamily(mu).curve(mu, a)
    assert np.all(p <= g + 1e-9)
    assert np.all(g - p <= 0.01)


def test_subsampled_gaussian_curve_properties() -> None:
    """A few fixed members (PLDs are slow): in [0, 1], non-increasing in α and θ, symmetric, and above
    the polygon at its own ε (at δ = 1e-5, the PLD's ε)."""
    sg = SubsampledGaussianFamily(0.8, sample_rate=0.1, steps=10)
    a = np.linspace(0, 1, 2001)
    prev = None
    for th in (0.2, 0.8, 2.0):
        y = sg.curve(th, a)
        assert np.all((y >= 0) & (y <= 1)) and np.all(np.diff(y) <= 1e-12)
        assert np.all(sg.curve(th, y) <= a + 1e-9)
        if prev is not None:
            assert np.all(y <= prev + 1e-12)
        prev = y
    e = sg.epsilon(0.8, 1e-5)
    assert np.all(sg.curve(0.8, a) >= EpsDeltaFamily(e, 1e-5).curve(e, a) - 1e-6)
    r = refute_point(sg, 0.05, 0.5, 1e-5)
    assert r.refutes_claim == sg.refutes(0.05, 0.5)
    assert r.epsilon >= e - 1e-9 if r.refutes_claim else r.epsilon <= e + 1e-9


# --- simulations with known truth ---------------------------------------------------------------

def _false_alarms(s_in: np.ndarray, s_out: np.ndarray, family: TradeoffFamily, delta: float) -> tuple[int, list[float]]:
    flagged, eps_hat = 0, []
    for si, so in zip(s_in, s_out):
        b = certify_claim_scores(si, so, family, tune_fraction=TUNE, level=LEVEL, delta=delta)
        flagged += b.point.refutes_claim
        eps_hat.append(b.eps_lower_bound)
    return flagged, eps_hat


def test_laplace_output_perturbation_honest_and_gdp_view_is_not() -> None:
    """Laplace noise b = 1/ε on a sensitivity-1 statistic, claiming ε = 2: neither the declared Laplace
    curve nor the (ε, 1e-5) polygon refutes it beyond level (≤ 19 of 200); the GDP view (a Gaussian
    curve through the same kind of point) does in a clear majority of audits — why it is not gated."""
    eps = 2.0
    rng = np.random.default_rng(20260)
    s_in = rng.laplace(1.0, 1 / eps, (AUDITS, RUNS))
    s_out = rng.laplace(0.0, 1 / eps, (AUDITS, RUNS))
    lap, lap_eps = _false_alarms(s_in, s_out, LaplaceFamily(eps), 0.0)
    poly, _ = _false_alarms(s_in, s_out, EpsDeltaFamily(eps, 1e-5), 1e-5)
    assert lap <= _limit(AUDITS) and poly <= _limit(AUDITS)
    assert 0.3 * eps < float(np.median(lap_eps)) <= eps  # not vacuous
    gdp = 0
    for si, so in zip(s_in, s_out):
        g, _, _, _ = certify_scores(si, so, tune_fraction=TUNE, level=LEVEL, delta=1e-5)
        gdp += g.eps_lower_bound_gdp > eps
    assert gdp > 0.75 * AUDITS  # measured 97 % at 320 runs per side (59 % at ε = 1)


def test_gaussian_output_perturbation_honest() -> None:
    eps = 1.0
    sigma = gaussian_mechanism_sigma(eps, 1e-5)
    assert GaussianFamily(1 / sigma).epsilon(1 / sigma, 1e-5) == pytest.approx(eps, rel=1e-6)
    rng = np.random.default_rng(20261)
    s_in = rng.normal(1.0, sigma, (AUDITS, RUNS))
    s_out = rng.normal(0.0, sigma, (AUDITS, RUNS))
    gauss, _ = _false_alarms(s_in, s_out, GaussianFamily(1 / sigma), 1e-5)
    poly, _ = _false_alarms(s_in, s_out, EpsDeltaFamily(eps, 1e-5), 1e-5)
    assert gauss <= _limit(AUDITS) and poly <= _limit(AUDITS)


def test_randomized_response_k10_honest_with_tied_scores() -> None:
    """10-ary randomized response, ε = 2: the score is 1 when the released label is the canary's label
    (probability p with the canary's label, r with another): two values only, every threshold ties.
    The certified point sits on the declared curve's vertex (r, 1 − p) — the hardest honest case."""
    eps = 2.0
    p, r = math.exp(eps) / (math.exp(eps) + 9), 1 / (math.exp(eps) + 9)
    rng = np.random.default_rng(20262)
    s_in = (rng.random((AUDITS, RUNS)) < p).astype(np.float64)
    s_out = (rng.random((AUDITS, RUNS)) < r).astype(np.float64)
    # the threshold code copes with ties: a certified τ between the two values gives the exact counts
    b = certify_claim_scores(s_in[0], s_out[0], RandomizedResponseFamily(eps, 10), tune_fraction=TUNE,
                             level=LEVEL, delta=0.0)
    ti, to = int(RUNS * TUNE), int(RUNS * TUNE)
    if 0.0 <= b.tau < 1.0:
        assert b.false_positives == int(s_out[0, to:].sum())
        assert b.false_negatives == int((s_in[0, ti:] == 0).sum())
    rr, rr_eps = _false_alarms(s_in, s_out, RandomizedResponseFamily(eps, 10), 0.0)
    poly, _ = _false_alarms(s_in, s_out, EpsDeltaFamily(eps, 0.0), 0.0)
    assert rr <= _limit(AUDITS) and poly <= _limit(AUDITS)
    assert float(np.median(rr_eps)) > 0.3 * eps


def test_power_laplace_weaker_than_claimed() -> None:
    """Laplace noise b = 1/(3ε) claiming ε = 1 (truly ε₀ = 3): the declared curve refutes it in most audits."""
    eps, n = 1.0, 50
    rng = np.random.default_rng(20263)
    s_in = rng.laplace(1.0, 1 / (3 * eps), (n, RUNS))
    s_out = rng.laplace(0.0, 1 / (3 * eps), (n, RUNS))
    lap, lap_eps = _false_alarms(s_in, s_out, LaplaceFamily(eps), 0.0)
    assert lap >= 0.8 * n
    assert sum(e > 3 * eps for e in lap_eps) <= _limit(n)  # still sound against the truth (ε₀ = 3)


def test_certify_claim_scores_refuses_non_finite_scores_anywhere() -> None:
    """A NaN in the certification share would sort last and count as a detection (a false refutation)."""
    from privaudit.stats.claim_runs import certify_claim_scores
    from privaudit.stats.tradeoff import LaplaceFamily

    rng = np.random.default_rng(0)
    si, so = rng.laplace(1, 1, 320), rng.laplace(0, 1, 320)
    si[64:] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        certify_claim_scores(si, so, LaplaceFamily(1.0), tune_fraction=0.2, level=0.05, delta=0.0)


def test_gaussian_curve_is_exact_at_tiny_alpha() -> None:
    """G_μ(α) = Φ(−Φ⁻¹(α) − μ): no rounding of 1 − α (G_8(1e-20) = 0.8966, not 1)."""
    from scipy import stats as st

    from privaudit.stats.tradeoff import GaussianFamily

    got = float(GaussianFamily(8.0).curve(8.0, np.array([1e-20]))[0])
    assert got == pytest.approx(st.norm.cdf(st.norm.isf(1e-20) - 8.0), rel=1e-9) and got < 0.9
