"""LTU Eq. 1/2 and Theorems 1/2 (Pedersen et al. 2022) with the paper's worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.stats import (
    ltu_pairwise_accuracy,
    ltu_pairwise_probabilities,
    ltu_privacy,
    ltu_theorem1_bound,
    ltu_theorem2_bound,
    ltu_utility,
)

# Table 3 (App. B): independent marginals of l(r) (columns) and l(d) (rows), as multiplicities
R_TABLE3 = [0.0] * 4 + [0.5] * 4 + [1.0] * 2
D_TABLE3 = [0.0] * 6 + [0.5] * 3 + [1.0] * 1


def test_eq1_privacy() -> None:
    score, se = ltu_privacy(0.6, 400)
    assert score == pytest.approx(0.8)
    assert se == pytest.approx(2 * math.sqrt(0.6 * 0.4 / 400))
    assert ltu_privacy(0.5, 10)[0] == 1.0
    assert ltu_privacy(0.2, 10)[0] == 1.0  # min{2(1-A), 1}
    assert ltu_privacy(1.0, 10) == (0.0, 0.0)


def test_eq2_utility() -> None:
    score, se = ltu_utility(0.55, 10, 2000)
    assert score == pytest.approx((10 * 0.55 - 1) / 9)
    assert se == pytest.approx(10 / 9 * math.sqrt(0.55 * 0.45 / 2000))  # delta method: c/(c-1) se(A)
    assert ltu_utility(0.55, 10, 2000, error="paper")[1] == pytest.approx(10 * math.sqrt(0.55 * 0.45 / 2000))
    assert ltu_utility(0.05, 10, 100)[0] == 0.0  # max{., 0}


def test_utility_error_is_the_standard_error_of_the_score() -> None:
    """Simulation with known truth: the spread of U over many Reserved sets equals the delta-method error
    (the paper's Eq. 2 error is 9x too large for 10 classes)."""
    rng = np.random.default_rng(0)
    c, n, a = 10, 900, 0.62
    scores = [(c * rng.binomial(n, a) / n - 1) / (c - 1) for _ in range(20000)]
    _, se = ltu_utility(a, c, n)
    assert np.std(scores) == pytest.approx(se, rel=0.03)
    assert ltu_utility(a, c, n, error="paper")[1] == pytest.approx(9 * se)


@pytest.mark.parametrize(
    "call,match",
    [(lambda: ltu_privacy(1.1, 10), "accuracy"), (lambda: ltu_privacy(0.5, 0), "rounds"),
     (lambda: ltu_utility(0.5, 1, 10), "n_classes"), (lambda: ltu_utility(0.5, 10, 0), "n_reserved")],
)
def test_bad_inputs(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("c,expected", [(0.6, 8 / 9), (0.8, 7 / 9), (0.95, 6 / 9)])
def test_app_c_pairwise_accuracy(c: float, expected: float) -> None:
    assert ltu_pairwise_accuracy([0.4, 0.7, 0.9], [0.1, 0.3, c]) == pytest.approx(expected)


def test_app_b_table3_theorem1_beats_theorem2() -> None:
    p_r, p_d = ltu_pairwise_probabilities(R_TABLE3, D_TABLE3)
    assert p_r - p_d == pytest.approx(0.22)
    assert np.mean(R_TABLE3) - np.mean(D_TABLE3) == pytest.approx(0.15)
    assert ltu_theorem1_bound(R_TABLE3, D_TABLE3) == pytest.approx(0.5 + 0.22 / 2)
    assert ltu_theorem2_bound(R_TABLE3, D_TABLE3) == pytest.approx(0.5 + 0.15 / 2)


def test_app_b_example1_theorem2_beats_theorem1() -> None:
    d = [0.0, 0.5]
    r = [0.3, 0.4]
    assert ltu_theorem1_bound(r, d) == pytest.approx(0.5)  # p_R = p_D = 1/2
    assert ltu_theorem2_bound(r, d) == pytest.approx(0.5 + 0.1 / 2)


def test_zero_one_loss_theorems_agree() -> None:
    rng = np.random.default_rng(3)
    r = (rng.random(300) < 0.4).astype(float)
    d = (rng.random(200) < 0.1).astype(float)
    assert ltu_theorem1_bound(r, d) == pytest.approx(ltu_theorem2_bound(r, d))


def test_theorem2_requires_bounded_loss() -> None:
    with pytest.raises(ValueError, match="loss_reserved"):
        ltu_theorem2_bound([1.5, 0.2], [0.1])


@given(
    r=st.lists(st.floats(0, 1), min_size=1, max_size=30),
    d=st.lists(st.floats(0, 1), min_size=1, max_size=30),
)
@settings(max_examples=60, deadline=None)
def test_pairwise_probabilities_match_bruteforce(r: list[float], d: list[float]) -> None:
    ra, da = np.array(r), np.array(d)
    p_r = np.mean(ra[:, None] > da[None, :])
    p_d = np.mean(ra[:, None] < da[None, :])
    got = ltu_pairwise_probabilities(r, d)
    assert got == (pytest.approx(p_r), pytest.approx(p_d))
    assert 0.5 <= ltu_theorem1_bound(r, d) <= 1.0


def test_theorem1_bound_holds_for_simulated_attacker() -> None:
    """The pairwise attacker's measured LTU accuracy on fresh pairs is close to the Theorem 1 value."""
    rng = np.random.default_rng(11)
    r = rng.normal(1.0, 1.0, 2000)
    d = rng.normal(0.5, 1.0, 2000)
    bound = ltu_theorem1_bound(r, d)
    i = rng.integers(0, 2000, 20000)
    j = rng.integers(0, 2000, 20000)
    acc = np.mean(r[i] > d[j])
    assert abs(acc - bound) < 0.02


def test_issue_34_alibi_utility_clears_the_floor_with_the_correct_error() -> None:
    """Issue 34: alibi-eps2 measured utility 0.606 on digits (10 classes, 899 Reserved rows); with Eq. 2's
    printed error it failed gate.min_utility 0.5 (0.606 − 0.160), with the standard error it clears it."""
    a = (9 * 0.606 + 1) / 10  # the accuracy behind U = 0.606
    u, se = ltu_utility(a, 10, 899)
    assert u == pytest.approx(0.606) and u - se > 0.5
    u_p, se_p = ltu_utility(a, 10, 899, error="paper")
    assert u_p - se_p < 0.5
