"""f-DP analysis of one run (Mahloujifar, Melis & Chaudhuri): conversions, the recursion, validity."""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from privaudit.audits.one_run import bounds_from_losses
from privaudit.stats.fdp_one_run import (
    eps_delta_blowup_inverse,
    fdp_min_total_mass,
    fdp_one_run_epsilon_lower_bound,
    fdp_one_run_mu_lower_bound,
    fdp_one_run_rejects,
    gdp_blowup_inverse,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
)
from privaudit.stats.one_run import one_run_epsilon_lower_bound

N = stats.norm


def _se(p: float, n: int) -> float:
    return 3 * math.sqrt(p * (1 - p) / n)


# ------------------------------------------------------------------------------ GDP conversions
@pytest.mark.parametrize("mu,eps", [(0.5, 0.3), (1.0, 1.0), (2.0, 3.0), (3.0, 8.0)])
def test_gdp_delta_is_the_hockey_stick_of_two_unit_gaussians(mu: float, eps: float) -> None:
    """Dong, Roth & Su Cor. 2.13 equals  integral max(0, p_mu - e^eps p_0)  computed numerically."""
    lo = eps / mu + mu / 2  # the integrand is positive exactly for x > lo
    num, _ = integrate.quad(lambda x: N.pdf(x - mu) - math.exp(eps) * N.pdf(x), lo, np.inf, epsabs=1e-14)
    assert gdp_delta(eps, mu) == pytest.approx(num, rel=1e-6, abs=1e-14)


def test_gdp_epsilon_inverts_delta_and_mu_inverts_epsilon() -> None:
    for mu in (0.1, 0.5, 1.0, 3.0):
        eps = gdp_epsilon(mu, 1e-5)
        assert gdp_delta(eps, mu) == pytest.approx(1e-5, rel=1e-6)
        assert gdp_mu(eps, 1e-5) == pytest.approx(mu, rel=1e-8)
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    assert gdp_epsilon(1e-7, 0.3) == 0.0  # delta(0) = 2 Phi(mu/2) - 1 < delta
    with pytest.raises(ValueError, match="delta"):
        gdp_epsilon(1.0, 0.0)


def test_blowup_inverses() -> None:
    inv = gdp_blowup_inverse(1.0)
    # fbar(x) = 1 - G_mu(x) = Phi(Phi^-1(x) + mu): its inverse undoes it
    for x in (1e-6, 0.01, 0.3, 0.9):
        assert inv(N.cdf(N.ppf(x) + 1.0)) == pytest.approx(x, rel=1e-9)
    assert inv(0.0) == 0.0 and inv(1.0) == 1.0
    e = eps_delta_blowup_inverse(1.0, 0.01)
    fbar = lambda x: min(1.0, math.e * x + 0.01, 1 - math.exp(-1) * (1 - 0.01 - x))  # noqa: E731
    for x in (0.0, 0.05, 0.2, 0.6, 0.95):
        assert fbar(e(fbar(x))) == pytest.approx(fbar(x), abs=1e-12)


# -------------------------------------------------------------------------- the recursion itself
def _exact_min_mass(k: int, c: int, m: int, tau: float, mu: float) -> float:
    """min sum(pi) s.t. P[C >= c] >= tau and H_i >= fbar^-1(R_{i+1}) (convex program of the module doc)."""
    inv = gdp_blowup_inverse(mu)
    lv = np.arange(k + 1)

    def rh(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        R = np.cumsum((lv * p)[::-1])[::-1] / m
        H = np.cumsum(((k - lv) * p)[::-1])[::-1] / m
        return R, H

    cons = [{"type": "ineq", "fun": lambda p: p[c:].sum() - tau}]
    cons += [{"type": "ineq", "fun": (lambda p, i=i: rh(p)[1][i] - inv(rh(p)[0][i + 1]))} for i in range(c)]
    best = math.inf
    for start in range(4):
        x0 = np.random.default_rng(start).random(k + 1) * 0.5
        res = optimize.minimize(lambda p: p.sum(), x0, bounds=[(0, 1)] * (k + 1), constraints=cons, method="SLSQP",
                                options={"maxiter": 500, "ftol": 1e-12})
        if res.success and all(cn["fun"](res.x) > -1e-8 for cn in cons):
            best = min(best, float(res.fun))
    return best


@pytest.mark.parametrize("k,c,m,tau,mu", [(6, 5, 8, 0.1, 1.0), (10, 7, 12, 0.05, 0.5), (8, 8, 8, 0.3, 2.0),
                                          (12, 6, 20, 0.2, 1.5)])
def test_recursion_equals_the_minimum_of_the_convex_program(k: int, c: int, m: int, tau: float, mu: float) -> None:
    """The greedy recursion computes the least total mass, so 'value > 1' is a sound rejection."""
    greedy = fdp_min_total_mass(c, k, m, gdp_blowup_inverse(mu), level=tau)
    exact = _exact_min_mass(k, c, m, tau, mu)
    assert greedy <= exact + 1e-6
    assert greedy == pytest.approx(exact, rel=1e-4)


def test_rejection_is_monotone_in_mu_and_correct_guesses() -> None:
    mus = np.linspace(0, 3, 31)
    rej = [fdp_one_run_rejects(180, 200, 1000, gdp_blowup_inverse(u), level=0.05) for u in mus]
    assert rej == sorted(rej, reverse=True)  # a prefix of True then False
    bounds = [fdp_one_run_mu_lower_bound(v, 200, 1000, level=0.05) for v in range(100, 201, 10)]
    assert bounds == sorted(bounds)


def test_eps_delta_curve_reproduces_steinke() -> None:
    """On the (eps, delta) curve the f-DP analysis matches Steinke et al.'s theorem (within 0.05)."""
    for v, r, m in [(90, 100, 1000), (180, 200, 1000), (400, 500, 1000), (160, 160, 160)]:
        s = one_run_epsilon_lower_bound(v, r, m, 1e-5, level=0.05)
        f = fdp_one_run_epsilon_lower_bound(v, r, m, 1e-5, level=0.05, curve="eps_delta")
        assert abs(s - f) < 0.05


def test_validation_names_the_argument() -> None:
    with pytest.raises(ValueError, match="correct"):
        fdp_one_run_mu_lower_bound(11, 10, 100, level=0.05)
    with pytest.raises(ValueError, match="guesses"):
        fdp_one_run_mu_lower_bound(5, 200, 100, level=0.05)
    with pytest.raises(ValueError, match="level"):
        fdp_one_run_mu_lower_bound(5, 10, 100, level=1.0)
    with pytest.raises(ValueError, match="curve"):
        fdp_one_run_epsilon_lower_bound(5, 10, 100, 1e-5, level=0.05, curve="laplace")


# --------------------------------------------------------------- never more than the truth (sims)
def _critical(k: int, rejects) -> int:  # noqa: ANN001
    """Smallest number of correct guesses c in [0, k] that rejects (rejection is monotone in c); k + 1 if none."""
    return bisect.bisect_left(range(k + 1), True, key=rejects)


def _correct_counts(m: int, kp: int, km: int, reps: int, rng: np.random.Generator, draw) -> np.ndarray:  # noqa: ANN001
    """C of `reps` one-run experiments: S ~ Bernoulli(1/2)^m, losses = draw(S), top-k+/bottom-k- guesses."""
    out = []
    for _ in range(reps // 500):
        S = rng.random((500, m)) < 0.5
        Ss = np.take_along_axis(S, np.argsort(draw(S, rng), axis=1, kind="stable"), axis=1)
        out.append(Ss[:, :kp].sum(1) + (~Ss[:, m - km:]).sum(1))
    return np.concatenate(out)


@pytest.mark.parametrize("mu", [0.5, 1.0])
def test_size_of_the_gdp_test_at_the_true_mu(mu: float) -> None:
    """Exactly mu-GDP canaries (loss = -mu S + N(0,1)): P(reject the true mu) <= level (4000 runs).

    Measured: the size is ~0.001 or less for m <= 1000 — the GDP analysis is conservative here."""
    rng = np.random.default_rng(11)
    m, kp, tau, reps = 1000, 50, 0.05, 4000
    c_star = _critical(2 * kp, lambda c: fdp_one_run_rejects(c, 2 * kp, m, gdp_blowup_inverse(mu), level=tau))
    C = _correct_counts(m, kp, kp, reps, rng, lambda S, r: -mu * S + r.standard_normal(S.shape))
    print(f"mu={mu}: c*={c_star}/{2 * kp}, size {np.mean(C >= c_star):.4f}, mean C {C.mean():.1f}")
    assert np.mean(C >= c_star) <= tau + _se(tau, reps)


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_size_of_the_eps_delta_curve_test_on_randomized_response(eps: float) -> None:
    """eps-DP randomized response: the recursion on the (eps, delta) curve rejects the truth with
    probability <= level and close to it (the analysis is nearly exact here, so the check has teeth)."""
    rng = np.random.default_rng(int(10 * eps))
    m, kp, tau, reps = 1000, 100, 0.05, 4000
    q = 1 / (1 + math.exp(-eps))

    def rr(S: np.ndarray, r: np.random.Generator) -> np.ndarray:
        return np.where(np.where(r.random(S.shape) < q, S, ~S), 0.0, 1.0) + 1e-3 * r.random(S.shape)

    c_star = _critical(2 * kp, lambda c: fdp_one_run_rejects(c, 2 * kp, m, eps_delta_blowup_inverse(eps, 1e-5),
                                                             level=tau))
    size = float(np.mean(_correct_counts(m, kp, kp, reps, rng, rr) >= c_star))
    print(f"eps={eps}: c*={c_star}/{2 * kp}, size {size:.4f}")
    assert size <= tau + _se(tau, reps)
    assert size >= 0.01  # not vacuous


def test_gaussian_mechanism_end_to_end_never_overclaims() -> None:
    """200 one-run experiments with exactly mu-GDP scores through the audit's own statistics (grid +
    Bonferroni): mu_hat, eps_hat (Steinke) and the (eps, delta)-curve bound never exceed the truth
    more often than level; the GDP eps at delta beats Steinke's."""
    rng = np.random.default_rng(2024)
    mu, m, reps, level, delta = 2.0, 200, 200, 0.1, 1e-5
    eps_true = gdp_epsilon(mu, delta)
    mus, steinke, curve = [], [], []
    for _ in range(reps):
        s = rng.random(m) < 0.5
        b = bounds_from_losses(-mu * s + rng.standard_normal(m), s, delta=delta, level=level, method="fdp",
                               k_grid=((0.1, 0.1), (0.5, 0.5)))
        mus.append(b.mu_lower_bound)
        steinke.append(b.eps_lower_bound)
        curve.append(b.eps_lower_bound_fdp_curve)
    mus_a = np.array(mus)
    print(f"mu={mu}: mean mu_hat {mus_a.mean():.3f} (eps_fdp {gdp_epsilon(mus_a.mean(), delta):.2f}), "
          f"steinke mean {np.mean(steinke):.2f}, curve mean {np.mean(curve):.2f}, true eps {eps_true:.2f}")
    for stat, truth in ((mus_a, mu), (np.array(steinke), eps_true), (np.array(curve), eps_true)):
        assert np.mean(stat > truth) <= level + _se(level, reps)
    assert mus_a.mean() > 0.25 * mu
    assert gdp_epsilon(float(np.median(mus_a)), delta) > 1.5 * float(np.median(steinke))


def test_randomized_response_end_to_end_never_overclaims() -> None:
    """200 runs of eps-DP randomized response: Steinke and the (eps, delta)-curve bound stay below eps."""
    rng = np.random.default_rng(7)
    eps, m, reps, level = 2.0, 200, 200, 0.1
    st, cv = [], []
    for _ in range(reps):
        s = rng.random(m) < 0.5
        keep = rng.random(m) < 1 / (1 + math.exp(-eps))
        losses = np.where(np.where(keep, s, ~s), 0.0, 1.0) + 1e-3 * rng.random(m)
        b = bounds_from_losses(losses, s, delta=1e-5, level=level, method="fdp", k_grid=((0.5, 0.5),))
        st.append(b.eps_lower_bound)
        cv.append(b.eps_lower_bound_fdp_curve)
    for stat in (np.array(st), np.array(cv)):
        print(f"eps={eps}: mean bound {stat.mean():.3f}, P(> eps) {np.mean(stat > eps):.3f}")
        assert np.mean(stat > eps) <= level + _se(level, reps)
        assert stat.mean() > 0.4 * eps
