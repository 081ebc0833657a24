"""privaudit.stats.whitebox on synthetic observations: coverage, checks, violations, accounting."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from privaudit.stats.gaussian_mechanism import gaussian_dp_delta
from privaudit.stats.whitebox import (
    LEVEL_SHARES,
    RunObservations,
    compose_epsilon,
    estimate_whitebox,
    subsampled_gaussian_one_step_epsilon,
    whitebox_bounds,
)

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:GDP accounting")

LEVEL = 0.05
SHARE = LEVEL / len(LEVEL_SHARES)


def _obs(rng: np.random.Generator, T: int = 50, d: int = 27, n: int = 200, q: float = 0.1, s: float = 2.0,
         C: float = 1.0, noise: np.ndarray | None = None, rows: np.ndarray | None = None) -> RunObservations:
    N = s * rng.standard_normal((T, d)) if noise is None else noise
    B = rng.binomial(n, q, T) if rows is None else rows
    return RunObservations.from_noise(N, B, C)


def _at_most(count: int, reps: int, p: float) -> bool:
    """count is within the 99.9 % binomial range of reps trials at rate p."""
    return count <= stats.binom.ppf(0.999, reps, p)


def test_no_overclaim_property_500_synthetic_audits() -> None:
    """Correct Gaussian mechanism, 600 audits: bounds cover and checks stay quiet at their shares."""
    rng = np.random.default_rng(2026)
    reps, s, q = 600, 2.0, 0.1
    miss_s = miss_q = flagged = 0
    per_check: dict[str, int] = {}
    for _ in range(reps):
        b = whitebox_bounds([_obs(rng, s=s, q=q)], dataset_size=200, level=LEVEL)
        failed = [c.name for c in b.checks if not c.passed]
        for name in failed:
            per_check[name] = per_check.get(name, 0) + 1
        miss_s += b.noise_std_upper < s
        miss_q += b.sample_rate_lower > q
        # ε̂ > ε_true needs z_U < s or q_L > q (the accountant is monotone): a superset of overclaims
        flagged += bool(failed) or b.noise_std_upper < s or b.sample_rate_lower > q
    assert _at_most(miss_s, reps, SHARE) and _at_most(miss_q, reps, SHARE)
    assert all(_at_most(k, reps, SHARE) for k in per_check.values()), per_check
    assert _at_most(flagged, reps, LEVEL)


def test_bounds_are_tight_with_many_steps() -> None:
    rng = np.random.default_rng(0)
    b = whitebox_bounds([_obs(rng, T=280, d=650, n=898, q=64 / 898, s=4.65)], dataset_size=898, level=LEVEL)
    assert 4.65 <= b.noise_std_upper < 4.65 * 1.01
    assert 0.96 * 64 / 898 < b.sample_rate_lower <= 64 / 898
    assert all(c.passed for c in b.checks)


def test_estimate_is_below_the_accountant_and_reports_the_model() -> None:
    rng = np.random.default_rng(1)
    runs = [_obs(rng, s=3.0, C=1.0), _obs(rng, T=48, s=3.0, C=1.0)]
    res = estimate_whitebox(runs, dataset_size=200, delta=1e-5, accountant="rdp", canary_scale=4.0, level=LEVEL)
    true = compose_epsilon([(3.0, 0.1, 48)], 1e-5, "rdp")[0]
    assert 0.6 * true < res.epsilon <= true and res.checks_passed and not res.overclaims(true)
    assert (res.runs, res.steps, res.total_steps, res.dimension, res.dataset_size) == (2, 48, 98, 27, 200)
    assert res.bound_source == "pooled" and res.epsilon_method == "prv lower"
    assert res.neighbourhood == "add_remove" and res.threat_model == "white-box: every intermediate update visible"
    assert "Poisson-subsampled Gaussian" in res.assumption and res.assumption.endswith("the point estimate is opacus's rdp")
    assert res.noise_multiplier == pytest.approx(res.noise_std_upper / res.sensitivity)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.epsilon = 0.0  # type: ignore[misc]


def test_one_step_epsilon_is_exact() -> None:
    for z in (0.7, 1.0, 3.0):
        eps = subsampled_gaussian_one_step_epsilon(z, 1.0, 1e-5)
        assert gaussian_dp_delta(z, eps) == pytest.approx(1e-5, rel=1e-6)  # analytic Gaussian mechanism
    for z, q in ((1.0, 0.1), (0.5, 0.07), (4.65, 0.0713)):
        one = subsampled_gaussian_one_step_epsilon(z, q, 1e-5)
        prv = compose_epsilon([(z, q, 1)], 1e-5, "prv")[0]
        assert one <= prv <= one + 0.02  # PRV's upper estimate (eps_error 0.01) sits just above


def test_compose_falls_back_without_blowing_memory() -> None:
    eps, how = compose_epsilon([(0.05, 0.07, 280)], 1e-5, "prv")  # PRV would need ~6e8 grid points
    assert how == "one-step exact" and eps == pytest.approx(subsampled_gaussian_one_step_epsilon(0.05, 0.07, 1e-5))
    assert compose_epsilon([(0.0, 0.1, 3)], 1e-5, "prv") == (math.inf, "no noise")
    assert compose_epsilon([(1.0, 0.0, 3)], 1e-5, "rdp") == (0.0, "accountant")
    hom = compose_epsilon([(2.0, 0.1, 20)], 1e-5, "gdp")[0]
    assert compose_epsilon([(2.0, 0.1, 10), (2.0, 0.1, 10)], 1e-5, "gdp")[0] == pytest.approx(hom)
    with pytest.raises(ValueError, match="accountant"):
        compose_epsilon([(1.0, 0.1, 1)], 1e-5, "moments")


@pytest.mark.parametrize("accountant, reps", [("rdp", 5), ("prv", 1)])
def test_heterogeneous_sigma_keeps_the_bound_valid(accountant: str, reps: int) -> None:
    """σ_t alternating with ratio 2 at the same mean variance: pooled ε̂ stays below the true ε."""
    rng = np.random.default_rng(3)
    s_mean, r, T, d = 2.0, 2.0, 50, 27
    s1 = s_mean * math.sqrt(2 / (1 + r * r))
    sig = np.where(np.arange(T) % 2 == 0, s1, r * s1)
    true = compose_epsilon([(s1, 0.1, T // 2), (r * s1, 0.1, T // 2)], 1e-5, accountant)[0]
    noticed = 0
    for _ in range(reps):
        res = estimate_whitebox([_obs(rng, noise=sig[:, None] * rng.standard_normal((T, d)))], dataset_size=200,
                                delta=1e-5, accountant=accountant, level=LEVEL)
        assert res.epsilon <= true
        noticed += "noise_homogeneity_steps" in res.failed_checks
    assert noticed >= (reps + 1) // 2  # with d = 27 a 4× variance ratio is usually visible as well


def test_laplace_noise_of_the_same_variance_is_noticed() -> None:
    rng = np.random.default_rng(4)
    for _ in range(10):
        N = rng.laplace(0.0, 2.0 / math.sqrt(2.0), (50, 27))  # variance 4, like s = 2
        b = whitebox_bounds([_obs(rng, noise=N)], dataset_size=200, level=LEVEL)
        assert not b.check("noise_gaussianity").passed
        assert b.check("noise_gaussianity").statistic > 3.8  # Laplace: kurtosis 6 (≈ 4.4 per step at d = 27) vs 3


def test_noise_missing_on_some_coordinates_gives_infinite_epsilon() -> None:
    rng = np.random.default_rng(5)
    N = 2.0 * rng.standard_normal((50, 27))
    N[:, -3:] = 0.0  # e.g. the bias left without noise
    res = estimate_whitebox([_obs(rng, noise=N)], dataset_size=200, delta=1e-5, accountant="rdp", level=LEVEL)
    assert "noise_homogeneity_coordinates" in res.failed_checks
    assert math.isinf(res.epsilon) and res.bound_source == "per-coordinate"


def test_noiseless_steps_and_correlated_noise_give_infinite_epsilon() -> None:
    rng = np.random.default_rng(6)
    N = 2.0 * rng.standard_normal((50, 27))
    N[np.arange(50) % 10 != 0] = 0.0  # noise once per epoch of 10 steps
    res = estimate_whitebox([_obs(rng, noise=N)], dataset_size=200, delta=1e-5, accountant="rdp", level=LEVEL)
    assert math.isinf(res.epsilon) and res.bound_source == "per-step"
    assert "noise_homogeneity_steps" in res.failed_checks and "without noise" in res.reasons[0]
    # AR(1) noise with correlation 0.5 between consecutive steps
    Z = rng.standard_normal((50, 27))
    A = np.empty_like(Z)
    A[0] = Z[0]
    for t in range(1, 50):
        A[t] = 0.5 * A[t - 1] + math.sqrt(0.75) * Z[t]
    res = estimate_whitebox([_obs(rng, noise=2.0 * A)], dataset_size=200, delta=1e-5, accountant="rdp", level=LEVEL)
    assert math.isinf(res.epsilon) and res.bound_source == "correlated noise"
    assert "cancels the noise" in " ".join(res.reasons)


def test_no_noise_and_unmeasured_sensitivity() -> None:
    rng = np.random.default_rng(7)
    res = estimate_whitebox([_obs(rng, T=20, noise=np.zeros((20, 5)))], dataset_size=200, delta=1e-5, level=LEVEL,
                            accountant="rdp")
    assert math.isinf(res.epsilon) and res.bound_source == "no noise" and res.reasons[0].startswith("no noise")
    obs = RunObservations.from_noise(rng.standard_normal((20, 5)), rng.binomial(200, 0.1, 20), np.nan)
    res = estimate_whitebox([obs], dataset_size=200, delta=1e-5, accountant="rdp", level=LEVEL)
    assert math.isinf(res.epsilon) and "sensitivity_observed" in res.failed_checks


def test_poisson_check_catches_fixed_and_ragged_batches_and_oversized_ones() -> None:
    rng = np.random.default_rng(8)
    for n, B, epochs in ((200, 20, 5), (200, 30, 5), (898, 64, 20)):
        rows = np.array(([B] * (n // B) + ([n % B] if n % B else [])) * epochs)
        b = whitebox_bounds([_obs(rng, T=len(rows), rows=rows)], dataset_size=n, level=LEVEL)
        assert not b.check("poisson_sampling").passed, (n, B)
    b = whitebox_bounds([_obs(rng, rows=np.full(50, 300))], dataset_size=200, level=LEVEL)
    assert not b.check("poisson_sampling").passed and "dataset_size" in b.check("poisson_sampling").detail


def test_validation_errors_name_the_argument() -> None:
    rng = np.random.default_rng(9)
    good = _obs(rng)
    with pytest.raises(ValueError, match="batch_rows"):
        RunObservations.from_noise(np.ones((3, 4)), [1, -1, 2], 1.0)
    with pytest.raises(ValueError, match="noise_sq"):
        RunObservations(batch_rows=np.ones(2), sensitivity=np.ones(2), noise_sq=np.ones(3), noise_quartic=np.ones(2),
                        noise_cos=np.ones(2), coord_sq=np.ones(4))
    with pytest.raises(ValueError, match="coord_sq"):
        RunObservations.from_noise(np.ones((3, 1)), [1, 1, 2], 1.0)
    with pytest.raises(ValueError, match="dataset_size"):
        whitebox_bounds([good], dataset_size=0, level=LEVEL)
    with pytest.raises(ValueError, match="level"):
        whitebox_bounds([good], dataset_size=200, level=1.5)
    with pytest.raises(ValueError, match="runs"):
        whitebox_bounds([], dataset_size=200, level=LEVEL)
    with pytest.raises(ValueError, match="same number of noise coordinates"):
        whitebox_bounds([good, _obs(rng, d=5)], dataset_size=200, level=LEVEL)
    with pytest.raises(ValueError, match="accountant"):
        estimate_whitebox([good], dataset_size=200, delta=1e-5, accountant="moments", level=LEVEL)
    with pytest.raises(ValueError, match="delta"):
        estimate_whitebox([good], dataset_size=200, delta=0.0, level=LEVEL)
    assert not good.batch_rows.flags.writeable  # frozen arrays
