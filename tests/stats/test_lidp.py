"""LiDP Algorithm 1 lines 7-8 and App. B.2 eq. (12)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.stats import (
    epsilon_from_bounds,
    lidp_epsilon_lower_bound,
    lidp_epsilon_lower_bound_replace_one,
    xbern_interval,
)


def _xy(rng: np.random.Generator, n: int, k: int, p1: float, p0: float) -> tuple[np.ndarray, np.ndarray]:
    return (rng.random((n, k)) < p1).astype(int), (rng.random((n, k)) < p0).astype(int)


@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("method", ["wilson", "bernstein"])
def test_algorithm1_lines_7_8(order: int, method: str) -> None:
    x, y = _xy(np.random.default_rng(0), 300, 8, 0.6, 0.1)
    level, delta = 0.05, 1e-5
    lo, _ = xbern_interval(x, level=level / 2, order=order, method=method)  # type: ignore[arg-type]
    _, up = xbern_interval(y, level=level / 2, order=order, method=method)  # type: ignore[arg-type]
    got = lidp_epsilon_lower_bound(x, y, delta, level=level, order=order, method=method)  # type: ignore[arg-type]
    assert got == pytest.approx(math.log((lo - delta) / up))
    assert got > 0


def test_nothing_certified_gives_zero() -> None:
    x, y = _xy(np.random.default_rng(1), 100, 4, 0.1, 0.5)
    assert lidp_epsilon_lower_bound(x, y, 1e-5, level=0.05) == 0.0
    assert lidp_epsilon_lower_bound(np.zeros((50, 4)), np.zeros((50, 4)), 1e-5, level=0.05) == 0.0
    assert epsilon_from_bounds(0.3, 0.5, 0.0) == 0.0  # log < 0 reported as 0
    assert epsilon_from_bounds(0.2, 0.1, 0.2) == 0.0  # lower <= delta -> -inf -> 0


def test_delta_reduces_bound() -> None:
    x, y = _xy(np.random.default_rng(2), 300, 8, 0.3, 0.05)
    assert lidp_epsilon_lower_bound(x, y, 0.1, level=0.05) < lidp_epsilon_lower_bound(x, y, 0.0, level=0.05)


@given(n_ones=st.integers(0, 200), extra=st.integers(0, 200), seed=st.integers(0, 1000))
@settings(max_examples=40, deadline=None)
def test_monotone_in_correct_guesses(n_ones: int, extra: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = 100, 4
    flat = np.zeros(n * k, dtype=int)
    idx = rng.permutation(n * k)
    flat[idx[: min(n_ones, n * k)]] = 1
    x_a = flat.reshape(n, k)
    flat2 = flat.copy()
    flat2[idx[: min(n_ones + extra, n * k)]] = 1  # superset of successes
    x_b = flat2.reshape(n, k)
    y = (rng.random((n, k)) < 0.05).astype(int)
    # order 1 only: with order >= 2 an extra success also raises mu2_hat and hence the variance
    # proxy, so the higher-order bound is not monotone in general.
    for method in ("wilson", "bernstein"):
        a = lidp_epsilon_lower_bound(x_a, y, 1e-5, level=0.05, order=1, method=method)  # type: ignore[arg-type]
        b = lidp_epsilon_lower_bound(x_b, y, 1e-5, level=0.05, order=1, method=method)  # type: ignore[arg-type]
        assert a <= b + 1e-12


@given(seed=st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_order1_monotone_in_x_and_antitone_in_y(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = _xy(rng, 80, 4, 0.5, 0.2)
    x_more = x.copy()
    x_more[rng.integers(0, 80), rng.integers(0, 4)] = 1
    y_more = y.copy()
    y_more[rng.integers(0, 80), rng.integers(0, 4)] = 1
    base = lidp_epsilon_lower_bound(x, y, 1e-5, level=0.05, order=1)
    assert lidp_epsilon_lower_bound(x_more, y, 1e-5, level=0.05, order=1) >= base - 1e-12
    assert lidp_epsilon_lower_bound(x, y_more, 1e-5, level=0.05, order=1) <= base + 1e-12


def test_replace_one_eq12() -> None:
    x, y = _xy(np.random.default_rng(3), 200, 8, 0.5, 0.1)
    assert lidp_epsilon_lower_bound_replace_one(x, y, 1e-5, level=0.05) == lidp_epsilon_lower_bound(x, y, 1e-5, level=0.05)
    with pytest.raises(ValueError, match="same models"):
        lidp_epsilon_lower_bound_replace_one(x, y[:100], 1e-5, level=0.05)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"delta": -0.1}, "delta"), ({"level": 0.0}, "level"), ({"order": 3}, "order"), ({"method": "jeffreys"}, "method")],
)
def test_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    x, y = _xy(np.random.default_rng(4), 20, 4, 0.5, 0.1)
    args = {"delta": 1e-5, "level": 0.05} | kwargs
    with pytest.raises(ValueError, match=match):
        lidp_epsilon_lower_bound(x, y, **args)


def test_rejects_non_binary() -> None:
    with pytest.raises(ValueError, match="y"):
        lidp_epsilon_lower_bound(np.ones((4, 2)), np.full((4, 2), 0.5), 0.0, level=0.05)
