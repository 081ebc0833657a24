"""One-run auditing (Steinke, Nasr & Jagielski 2023) checked on eps-DP randomized response."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from privaudit.stats import (
    clopper_pearson,
    one_run_counts,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)


def _randomized_response_run(rng: np.random.Generator, m: int, eps: float, abstain: float) -> tuple[int, int, int]:
    """eps-DP randomized response on m canaries; the auditor guesses the released bit or abstains."""
    included = rng.integers(0, 2, m)
    keep = rng.random(m) < 1 / (1 + math.exp(-eps))
    released = np.where(keep, included, 1 - included)
    guesses = np.where(released == 1, 1, -1)
    guesses[rng.random(m) < abstain] = 0
    return one_run_counts(included, guesses)


@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("abstain", [0.0, 0.7])
def test_randomized_response_never_overclaims_beyond_beta(eps: float, abstain: float) -> None:
    rng = np.random.default_rng(int(eps * 10) + int(abstain * 100))
    level, reps, m = 0.1, 300, 400
    bounds = np.array([one_run_epsilon_lower_bound(*_randomized_response_run(rng, m, eps, abstain), level=level)
                       for _ in range(reps)])
    over = float(np.mean(bounds > eps))
    print(f"eps={eps} abstain={abstain}: mean bound {bounds.mean():.3f}, P(bound > eps) = {over:.3f}")
    # W ~ Binomial(r, q) exactly, so P(bound > eps) <= level; allow binomial noise of the reps
    assert over <= level + 3 * math.sqrt(level * (1 - level) / reps)
    assert bounds.mean() > 0.5 * eps  # and the test has power


def test_pure_dp_bound_is_one_sided_clopper_pearson() -> None:
    """delta = 0: eps_hat = log(p/(1-p)) with p the one-sided (1-level) exact lower bound on v/r."""
    v, r, m, level = 830, 1000, 2000, 0.05
    p_lo, _ = clopper_pearson(v, r, level=level)
    assert one_run_epsilon_lower_bound(v, r, m, level=level) == pytest.approx(math.log(p_lo / (1 - p_lo)), abs=1e-7)


def test_p_value_matches_binomial_tail_and_delta_term() -> None:
    v, r, m, eps, delta = 70, 100, 1000, 0.3, 1e-4
    q = 1 / (1 + math.exp(-eps))
    f = lambda t: sps.binom.sf(t - 1, r, q)  # noqa: E731
    alpha = max((f(v - i) - f(v)) / i for i in range(1, v + 1))
    assert one_run_p_value(v, r, m, eps) == pytest.approx(f(v))
    assert one_run_p_value(v, r, m, eps, delta) == pytest.approx(min(1.0, f(v) + 2 * m * delta * alpha))


@given(v1=st.integers(0, 300), v2=st.integers(0, 300), delta=st.sampled_from([0.0, 1e-6, 1e-3]))
@settings(max_examples=40, deadline=None)
def test_monotone_in_correct_guesses(v1: int, v2: int, delta: float) -> None:
    a, b = sorted((v1, v2))
    assert one_run_epsilon_lower_bound(a, 300, 1000, delta, level=0.05) <= \
        one_run_epsilon_lower_bound(b, 300, 1000, delta, level=0.05) + 1e-9


def test_delta_and_more_canaries_weaken_the_bound() -> None:
    base = one_run_epsilon_lower_bound(900, 1000, 1000, 0.0, level=0.05)
    assert one_run_epsilon_lower_bound(900, 1000, 1000, 1e-5, level=0.05) < base
    assert one_run_epsilon_lower_bound(900, 1000, 10**5, 1e-5, level=0.05) < \
        one_run_epsilon_lower_bound(900, 1000, 1000, 1e-5, level=0.05)


def test_counts_and_validation() -> None:
    assert one_run_counts([1, 1, 0, 0], [1, -1, -1, 0]) == (2, 3, 4)
    with pytest.raises(ValueError, match="guesses"):
        one_run_counts([1, 0], [2, 0])
    with pytest.raises(ValueError, match="correct"):
        one_run_epsilon_lower_bound(11, 10, 100, level=0.05)
    with pytest.raises(ValueError, match="guesses"):
        one_run_epsilon_lower_bound(5, 200, 100, level=0.05)
    with pytest.raises(ValueError, match="level"):
        one_run_epsilon_lower_bound(5, 10, 100, level=1.0)
    assert one_run_epsilon_lower_bound(0, 0, 100, level=0.05) == 0.0


@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("delta", [0.0, 1e-4])
def test_exact_overclaim_probability_at_most_beta(eps: float, delta: float) -> None:
    """Enumerate W ~ Binomial(r, e^eps/(1+e^eps)) (randomized response, no abstention) exactly."""
    r, level = 200, 0.1
    q = 1 / (1 + math.exp(-eps))
    pmf = sps.binom.pmf(np.arange(r + 1), r, q)
    # v below the mean r*q has p-value >= ~1/2 at eps, so it cannot certify more than eps
    p_over = sum(pmf[v] for v in range(int(r * q), r + 1)
                 if one_run_epsilon_lower_bound(v, r, r, delta, level=level) > eps)
    print(f"eps={eps} delta={delta}: exact P(bound > eps) = {p_over:.4f}")
    assert p_over <= level
    if delta == 0.0:
        assert p_over > 0.5 * level  # the pure-DP bound is tight up to binomial discreteness
