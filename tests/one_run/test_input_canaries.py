"""Input-space canaries: plain rows in the low-variance subspace, one per (direction, label) cell."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.canaries.designs import tail_singular_vectors
from privaudit.canaries.input_canaries import INPUT_DESIGNS, cell_capacity, make_input_canaries, tail_basis


def test_tail_basis_matches_the_svd_tail() -> None:
    X = np.random.default_rng(0).standard_normal((300, 20)) * np.linspace(0.1, 3, 20)
    A, B = tail_basis(X, 5), tail_singular_vectors(X, 5)
    np.testing.assert_allclose(np.abs(np.sum(A * B, axis=1)), 1.0, atol=1e-6)  # same vectors up to sign
    np.testing.assert_allclose(A @ A.T, np.eye(5), atol=1e-12)


@pytest.mark.parametrize("design", INPUT_DESIGNS)
def test_every_design_gives_rows_of_norm_alpha_in_the_tail(design: str, digits) -> None:
    c = make_input_canaries(digits.X, 10, 160, np.random.default_rng(0), design=design, scale=4.0)
    assert c.X.shape == (160, 64) and c.X.dtype == np.float32
    assert c.y.shape == (160,) and c.y.dtype == np.int64 and set(c.y) <= set(range(10))
    median_norm = float(np.median(np.linalg.norm(digits.X, axis=1)))
    np.testing.assert_allclose(np.linalg.norm(c.X, axis=1), 4.0 * median_norm, rtol=1e-5)
    # the canaries live where the training rows have (almost) no energy
    V = tail_basis(digits.X, 16)
    np.testing.assert_allclose(np.linalg.norm(c.X @ V.T, axis=1), c.alpha, rtol=1e-5)
    energy = np.linalg.norm(digits.X @ (c.X / c.alpha).T, axis=0) / np.linalg.norm(digits.X)
    assert energy.max() < 0.05
    assert design in c.describe()


def test_tail_cells_are_distinct_and_orthogonal_across_directions(digits) -> None:
    m = cell_capacity(64, 10)
    assert m == 160
    c = make_input_canaries(digits.X, 10, m, np.random.default_rng(1))
    assert c.design == "tail_cells"
    direction = np.argmax(np.abs(c.X @ tail_basis(digits.X, 16).T), axis=1)
    cells = set(zip(direction.tolist(), c.y.tolist()))
    assert len(cells) == m  # every (direction, label) cell exactly once
    G = c.X @ c.X.T / c.alpha**2
    same = direction[:, None] == direction[None, :]
    np.testing.assert_allclose(G[~same], 0.0, atol=1e-5)
    np.testing.assert_allclose(G[same], 1.0, atol=1e-5)
    # more canaries than cells: cells are reused as evenly as possible
    big = make_input_canaries(digits.X, 10, 2 * m + 5, np.random.default_rng(1))
    d2 = np.argmax(np.abs(big.X @ tail_basis(digits.X, 16).T), axis=1)
    _, counts = np.unique(d2 * 10 + big.y, return_counts=True)
    assert counts.min() >= 2 and counts.max() <= 3


def test_same_generator_same_canaries(digits) -> None:
    a = make_input_canaries(digits.X, 10, 50, np.random.default_rng(5), design="tail_random")
    b = make_input_canaries(digits.X, 10, 50, np.random.default_rng(5), design="tail_random")
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


@pytest.mark.parametrize("kwargs,match", [
    ({"design": "clipbkd"}, "design"),
    ({"labels": "wrong"}, "labels"),
    ({"scale": 0.0}, "scale"),
    ({"tail_dim": 0}, "tail_dim"),
    ({"tail_dim": 65}, "tail_dim"),
    ({"count": 0}, "count"),
    ({"n_classes": 1}, "n_classes"),
])
def test_validation_names_the_argument(kwargs: dict, match: str, digits) -> None:
    args = {"X": digits.X, "n_classes": 10, "count": 10, "rng": np.random.default_rng(0)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_input_canaries(**args)
