"""Example user trainer for ``kind: python`` (see privaudit.defenders.user for the protocol).

``train`` fits a nearest-class-mean classifier with a softmax over negative squared distances
(temperature ``temperature``): deterministic and order invariant, so the params entry declares
``deterministic: true, order_invariant: true``. It is saved as a safetensors state
(``state_dict``) and rebuilt by ``load``.
"""

from __future__ import annotations

import numpy as np


class NearestMean:
    """Class means (C, d); ``predict_proba`` = softmax(−‖x − μ_c‖² / temperature)."""

    def __init__(self, means: np.ndarray, temperature: float) -> None:
        self.means = np.asarray(means, dtype=np.float64)
        self.temperature = float(temperature)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        d2 = ((np.asarray(X, dtype=np.float64)[:, None, :] - self.means[None]) ** 2).sum(axis=2)
        z = -d2 / self.temperature
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"means": self.means, "temperature": np.array([self.temperature])}


def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, temperature: float = 1.0) -> NearestMean:
    """Protocol: (X (n, d), y (n,), n_classes, seed, **options) -> object with predict_proba."""
    means = np.zeros((n_classes, X.shape[1]))
    for c in range(n_classes):
        if np.any(y == c):
            means[c] = X[y == c].mean(axis=0)
    return NearestMean(means, temperature)


def load(state: dict[str, np.ndarray], n_classes: int, temperature: float = 1.0) -> NearestMean:
    """Rebuild the model from its saved state (the spec's ``loader``)."""
    return NearestMean(state["means"], float(state["temperature"][0]))
