"""Issue 13: ACGR interval valid for a bounded mean; delta in Theorem B.1 (Malek et al. App. B)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from privaudit.stats import acgr_epsilon, acgr_interval, clopper_pearson, epsilon_from_accuracy, game3_epsilon

# --------------------------------------------------------------------------------------- ACGR


def test_acgr_equal_rates_no_longer_zero_width() -> None:
    """Two canaries with the same rate 7/8: the normal interval had zero width, (1.946, 1.946)."""
    mean, lo, hi = acgr_interval([7, 7], [8, 8], level=0.025)
    assert mean == pytest.approx(7 / 8)
    assert lo < mean < hi and hi - lo > 0.5  # two (possibly fully correlated) canaries say little
    e_lo, e_hi = acgr_epsilon([7, 7], [8, 8], level=0.025)
    assert e_lo < math.log(7) < e_hi  # log(7) = 1.946 was the old zero-width answer
    # all canaries right, equal weights: exact Clopper-Pearson on the N canaries, not on the N*M guesses
    _, lo, hi = acgr_interval([8] * 50, [8] * 50, level=0.025)
    assert lo == pytest.approx(clopper_pearson(50, 50, level=0.025)[0]) and hi == 1.0
    assert lo < clopper_pearson(400, 400, level=0.025)[0]


def test_acgr_single_canary_and_one_guess_per_canary() -> None:
    # one canary carries all the weight: no spread estimate; Clopper-Pearson on one "trial"
    mean, lo, hi = acgr_interval([3, 0], [4, 0], level=0.025)
    assert mean == 0.75 and lo == pytest.approx(sps.beta.ppf(0.025, 0.75, 1.25)) and hi > 0.99
    # C = 3: one guess per canary, the interval contains the exact binomial one
    c = np.r_[np.ones(70), np.zeros(20), np.zeros(10)]
    g = np.r_[np.ones(90), np.zeros(10)]
    _, lo, hi = acgr_interval(c, g, level=0.025)
    cp = clopper_pearson(70, 90, level=0.025)
    assert lo <= cp[0] + 1e-12 and hi >= cp[1] - 1e-12


def _rr_counts(rng: np.random.Generator, n_classes: int, eps: float, n: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """(reps, n) ACGR counts of a model that outputs one label by eps-randomized response on the
    trained label; for each alternative label a it guesses the trained label if that was output,
    a if a was output, and abstains otherwise.  Correct-guess rate among guesses: e^eps/(1+e^eps)."""
    denom = math.exp(eps) + n_classes - 1
    u = rng.random((reps, n))
    out_trained = u < math.exp(eps) / denom
    out_alt = ~out_trained & (u < (math.exp(eps) + n_classes - 2) / denom)
    correct = (n_classes - 2) * out_trained
    return correct, correct + out_alt


def _all_or_nothing_counts(rng: np.random.Generator, n_classes: int, eps: float, n: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Each canary is right on all C-2 alternatives (prob. e^eps/(1+e^eps)) or wrong on all."""
    right = rng.random((reps, n)) < 1 / (1 + math.exp(-eps))
    return (n_classes - 2) * right, np.full((reps, n), n_classes - 2)


@pytest.mark.parametrize(
    "design,n_classes,eps,n",
    [("rr", 3, 3.0, 100), ("rr", 3, 1.0, 300), ("rr", 10, 5.0, 20), ("rr", 10, 1.0, 100),
     ("all_or_nothing", 10, 3.0, 100)],
)
def test_acgr_eps_low_miss_rate_with_known_epsilon(design: str, n_classes: int, eps: float, n: int) -> None:
    """P(eps_low > eps) <= level + 3 binomial sd over 600 runs of a mechanism with known eps.

    Measured on these seeds, new interval (old normal interval; "t, or Clopper-Pearson on the
    pooled guesses when narrower"): rr C=3 eps=3 N=100: 0.017 (0.063; 0.017); rr C=3 eps=1
    N=300: 0.027 (0.033; 0.027); rr C=10 eps=5 N=20: 0 (0.373; 0); rr C=10 eps=1 N=100: 0 (0; 0);
    all-or-nothing C=10 eps=3 N=100: 0.002 (0.052; 0.052) -- pooled guesses are not independent.
    """
    reps, level = 600, 0.025
    rng = np.random.default_rng(100 + n_classes * 10 + n)
    gen = _rr_counts if design == "rr" else _all_or_nothing_counts
    correct, guesses = gen(rng, n_classes, eps, n, reps)
    over = sum(acgr_epsilon(c, g, level=level)[0] > eps for c, g in zip(correct, guesses) if g.sum() > 0)
    bound = level + 3 * math.sqrt(level * (1 - level) / reps)
    print(f"{design} C={n_classes} eps={eps} N={n}: P(eps_low > eps) = {over / reps:.3f} (bound {bound:.3f})")
    assert over / reps <= bound


def test_acgr_interval_is_the_more_conservative_of_t_and_effective_cp() -> None:
    rng = np.random.default_rng(3)
    g = rng.integers(0, 9, 60)
    c = rng.binomial(g, 0.8)
    mean, lo, hi = acgr_interval(c, g, level=0.05)
    w = g.astype(float)
    v1, v2 = w.sum(), (w * w).sum()
    rate = np.divide(c, g, out=np.zeros(60), where=g > 0)
    se = math.sqrt(np.sum(w * (rate - mean) ** 2) / (v1 - v2 / v1) * v2) / v1
    n_eff = v1 * v1 / v2
    t = sps.t.isf(0.05, n_eff - 1)
    s = mean * n_eff
    assert lo == pytest.approx(min(mean - t * se, sps.beta.ppf(0.05, s, n_eff - s + 1)))
    assert hi == pytest.approx(max(mean + t * se, sps.beta.ppf(0.95, s + 1, n_eff - s)))


# ------------------------------------------------------------------------------ delta (Thm B.1)


def test_epsilon_from_accuracy_with_delta_golden() -> None:
    assert epsilon_from_accuracy(0.9, delta=0.05) == pytest.approx(math.log(0.85 / 0.1))  # 2.1401
    assert epsilon_from_accuracy(0.9, 0.0) == epsilon_from_accuracy(0.9)
    assert epsilon_from_accuracy(0.52, delta=0.05) == 0.0  # p <= (1 + delta) / 2
    assert epsilon_from_accuracy(1.0, delta=0.3) == math.inf
    # the bound is tight: accuracy (e^eps + delta) / (1 + e^eps) maps back to eps
    e, d = 2.0, 1e-3
    assert epsilon_from_accuracy((math.exp(e) + d) / (1 + math.exp(e)), d) == pytest.approx(e)
    with pytest.raises(ValueError, match="delta"):
        epsilon_from_accuracy(0.9, delta=1.5)


def test_game3_and_acgr_epsilon_accept_delta() -> None:
    lo, hi = clopper_pearson(900, 1000, level=0.025)
    assert game3_epsilon(900, 1000, delta=0.01, level=0.025) == (
        pytest.approx(math.log((lo - 0.01) / (1 - lo))), pytest.approx(math.log((hi - 0.01) / (1 - hi))))
    assert game3_epsilon(900, 1000, 0.0, level=0.025) == game3_epsilon(900, 1000, level=0.025)
    c, g = [80, 90, 70, 80] * 25, [100] * 100
    _, a_lo, a_hi = acgr_interval(c, g, level=0.025)
    assert acgr_epsilon(c, g, delta=0.02, level=0.025) == (
        pytest.approx(epsilon_from_accuracy(a_lo, 0.02)), pytest.approx(epsilon_from_accuracy(a_hi, 0.02)))
    assert acgr_epsilon(c, g, delta=0.02, level=0.025)[0] < acgr_epsilon(c, g, level=0.025)[0]


@given(p1=st.floats(0.0, 1.0), p2=st.floats(0.0, 1.0), d1=st.floats(0.0, 1.0), d2=st.floats(0.0, 1.0))
@settings(max_examples=200, deadline=None)
def test_epsilon_from_accuracy_monotone_in_p_and_decreasing_in_delta(p1: float, p2: float, d1: float, d2: float) -> None:
    (pa, pb), (da, db) = sorted((p1, p2)), sorted((d1, d2))
    assert epsilon_from_accuracy(pa, da) <= epsilon_from_accuracy(pb, da)  # non-decreasing in p
    assert epsilon_from_accuracy(pa, db) <= epsilon_from_accuracy(pa, da)  # non-increasing in delta
    assert epsilon_from_accuracy(pa, da) >= 0.0
