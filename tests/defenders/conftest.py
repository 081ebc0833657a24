"""Tiny digits data for the defender tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.torch_threads import _one_torch_thread  # noqa: F401 - autouse fixture


@dataclass(frozen=True)
class Tiny:
    X: np.ndarray  # (n_train, 64) float32 in [0, 1]
    y: np.ndarray  # (n_train,) int64
    Xt: np.ndarray  # held-out rows
    yt: np.ndarray
    n_classes: int = 10


def _digits(n_train: int, n_test: int, seed: int) -> Tiny:
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(seed).permutation(len(y))
    tr, te = idx[:n_train], idx[n_train:n_train + n_test]
    X = (X / 16.0).astype(np.float32)
    return Tiny(X[tr], y[tr].astype(np.int64), X[te], y[te].astype(np.int64))


@pytest.fixture(scope="session")
def tiny() -> Tiny:
    """300 training and 200 held-out digits."""
    return _digits(300, 200, 0)


@pytest.fixture(scope="session")
def medium() -> Tiny:
    """900 training and 500 held-out digits (accuracy-vs-epsilon tests)."""
    return _digits(900, 500, 1)
