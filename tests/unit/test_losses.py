"""The one per-sample cross-entropy: exact −log p(y|x) down to 1e-300, finite at p = 0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss

from privaudit.losses import PROBA_FLOOR, cross_entropy


def test_golden_values() -> None:
    proba = np.array([[0.5, 0.5], [1.0, 0.0], [1e-20, 1.0 - 1e-20], [0.25, 0.75]])
    got = cross_entropy(proba, np.array([0, 1, 0, 1]))
    np.testing.assert_allclose(got, [math.log(2), -math.log(PROBA_FLOOR), 20 * math.log(10), -math.log(0.75)])
    assert got[2] > 27.64  # the old 1e-12 clip capped this at 27.63


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.floats(0.5, 5.0), min_size=2, max_size=6), st.integers(0, 10**6))  # p(y) >> sklearn's clip
def test_mean_equals_sklearn_log_loss(weights: list[float], seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.asarray(weights), size=30)
    y = rng.integers(0, len(weights), 30)
    assert cross_entropy(p, y).mean() == pytest.approx(
        log_loss(y, p, labels=list(range(len(weights)))), rel=1e-9, abs=1e-12)


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="proba must be"):
        cross_entropy(np.ones(3), np.zeros(3, int))
