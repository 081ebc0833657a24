"""Digits as the one-run audit sees them: ~900 standardised training rows, 10 classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_digits


@dataclass(frozen=True)
class Digits:
    X: np.ndarray  # (900, 64) float32, standardised on the training rows
    y: np.ndarray  # (900,) int64
    n_classes: int = 10


def digits_train(n: int = 900, seed: int = 0) -> Digits:
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(seed).permutation(len(y))[:n]
    X, y = X[idx], y[idx]
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return Digits(((X - X.mean(axis=0)) / sd).astype(np.float32), y.astype(np.int64))
