"""Clopper-Pearson against scipy's exact interval; Game 3 / ACGR (Malek et al. App. B)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from privaudit.stats import (
    acgr_epsilon,
    acgr_interval,
    clopper_pearson,
    epsilon_from_accuracy,
    game3_epsilon,
)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (512, 1000), (1, 5000)])
@pytest.mark.parametrize("level", [0.025, 0.005, 0.1])
def test_clopper_pearson_matches_scipy_exact(k: int, n: int, level: float) -> None:
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * level, method="exact")
    lo, hi = clopper_pearson(k, n, level=level)
    assert lo == pytest.approx(ref.low, abs=1e-10)
    assert hi == pytest.approx(ref.high, abs=1e-10)


def test_clopper_pearson_vectorized() -> None:
    k = np.array([0, 5, 10])
    lo, hi = clopper_pearson(k, 10, level=0.025)
    assert lo.shape == (3,) and hi.shape == (3,)
    for i, kk in enumerate(k):
        assert (lo[i], hi[i]) == pytest.approx(clopper_pearson(int(kk), 10, level=0.025))


@pytest.mark.parametrize(
    "args,match",
    [((11, 10, 0.025), "k must"), ((-1, 10, 0.025), "k must"), ((1, 0, 0.025), "n must"),
     ((1.5, 10, 0.025), "k must be integer"), ((1, 10, 0.75), "level"), ((1, 10, 0.5), "level"),
     ((1, 10, 0.0), "level")],
)
def test_clopper_pearson_rejects_bad_input(args: tuple, match: str) -> None:
    k, n, level = args
    with pytest.raises(ValueError, match=match):
        clopper_pearson(k, n, level=level)


def test_clopper_pearson_coverage_simulation() -> None:
    rng = np.random.default_rng(1)
    n, p, reps, level = 50, 0.3, 4000, 0.05
    k = rng.binomial(n, p, size=reps)
    lo, hi = clopper_pearson(k, n, level=level)
    miss = np.mean((p < lo) | (p > hi))
    assert miss <= 2 * level  # exact interval is conservative


def test_epsilon_from_accuracy() -> None:
    assert epsilon_from_accuracy(0.5) == 0.0
    assert epsilon_from_accuracy(0.2) == 0.0
    assert epsilon_from_accuracy(1 / (1 + math.exp(-3.0))) == pytest.approx(3.0)
    assert epsilon_from_accuracy(1.0) == math.inf
    with pytest.raises(ValueError, match="p"):
        epsilon_from_accuracy(1.2)


@given(c1=st.integers(0, 200), c2=st.integers(0, 200), m=st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_game3_monotone_in_correct_guesses(c1: int, c2: int, m: int) -> None:
    a, b = sorted((min(c1, m), min(c2, m)))
    lo_a, hi_a = game3_epsilon(a, m, level=0.025)
    lo_b, hi_b = game3_epsilon(b, m, level=0.025)
    assert lo_a <= lo_b and hi_a <= hi_b
    assert 0.0 <= lo_a <= hi_a


def test_game3_uses_clopper_pearson_not_normal() -> None:
    lo, hi = clopper_pearson(95, 100, level=0.025)
    assert game3_epsilon(95, 100, level=0.025) == (pytest.approx(math.log(lo / (1 - lo))),
                                                   pytest.approx(math.log(hi / (1 - hi))))
    # the normal approximation would give a different (narrower) lower end here
    p = 0.95
    normal_lo = p - 1.96 * math.sqrt(p * (1 - p) / 100)
    assert game3_epsilon(95, 100, level=0.025)[0] != pytest.approx(math.log(normal_lo / (1 - normal_lo)), abs=1e-3)


def test_game3_all_correct_gives_infinite_upper() -> None:
    lo, hi = game3_epsilon(100, 100, level=0.025)
    assert math.isfinite(lo) and lo > 0 and hi == math.inf


def test_game3_bad_input() -> None:
    with pytest.raises(ValueError, match="correct"):
        game3_epsilon(11, 10, level=0.025)
    with pytest.raises(ValueError, match="guesses"):
        game3_epsilon(0, 0, level=0.025)


def test_game3_randomized_response_no_overclaim() -> None:
    """eps-DP randomized response on N canaries: eps_low exceeds eps in <= level of runs."""
    rng = np.random.default_rng(7)
    eps, n, reps = 1.0, 500, 400
    q = 1 / (1 + math.exp(-eps))
    correct = rng.binomial(n, q, size=reps)
    over = sum(game3_epsilon(int(c), n, level=0.025)[0] > eps for c in correct)
    assert over / reps <= 0.025 + 0.02


def test_acgr_weighted_mean_and_interval() -> None:
    # Golden values changed (issue 13): the interval used to be the normal (Wald) one,
    # ``mean -/+ z * se``, which overclaims (zero width when all rates are equal, lower-end miss
    # 0.06-0.10 instead of 0.025 with C = 3).  It is now the more conservative of the Student-t
    # interval on the same reliability-weighted mean/se and a Clopper-Pearson interval on the
    # effective number of canaries; both are recomputed here from their definitions.
    correct = np.array([9, 0, 4, 0])
    guesses = np.array([10, 0, 5, 1])  # canary 2 abstained on every label (0/0 -> 0, weight 0)
    mean, lo, hi = acgr_interval(correct, guesses, level=0.025)
    assert mean == pytest.approx(13 / 16)
    acgr = np.array([0.9, 0.0, 0.8, 0.0])
    w = guesses.astype(float)
    v1, v2 = w.sum(), (w**2).sum()
    var = np.sum(w * (acgr - mean) ** 2) / (v1 - v2 / v1)
    se = math.sqrt(var * v2) / v1
    n_eff = v1**2 / v2
    t = sps.t.isf(0.025, n_eff - 1)
    s = n_eff * mean
    cp_lo, cp_hi = sps.beta.ppf(0.025, s, n_eff - s + 1), sps.beta.ppf(0.975, s + 1, n_eff - s)
    assert lo == pytest.approx(max(0.0, min(mean - t * se, cp_lo)))
    assert hi == pytest.approx(min(1.0, max(mean + t * se, cp_hi)))
    # never narrower than the old normal interval
    assert lo <= mean - 1.959963984540054 * se and hi >= min(1.0, mean + 1.959963984540054 * se)
    e_lo, e_hi = acgr_epsilon(correct, guesses, level=0.025)
    assert e_lo == pytest.approx(epsilon_from_accuracy(lo)) and e_hi == pytest.approx(epsilon_from_accuracy(hi))


def test_acgr_bad_input() -> None:
    with pytest.raises(ValueError, match="abstained"):
        acgr_epsilon([0, 0], [0, 0], level=0.025)
    with pytest.raises(ValueError, match="correct_per_canary"):
        acgr_epsilon([3], [2], level=0.025)
    with pytest.raises(ValueError, match="shapes"):
        acgr_epsilon([1, 2], [3], level=0.025)
    with pytest.raises(ValueError, match="level"):
        acgr_epsilon([1, 2], [3, 3], level=0.5)
