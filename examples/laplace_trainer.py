"""An exactly epsilon-DP trainer by output perturbation (``kind: python``): Laplace noise on class sums.

Every training row is clipped to L1 norm at most 1 and added to its class's sum; the (C, d) matrix of
sums is released with i.i.d. Laplace noise of scale ``1/epsilon`` per entry. Adding or removing one row
moves one class sum by a vector of L1 norm <= 1, so the release is the Laplace mechanism with L1
sensitivity 1: pure ``epsilon``-DP (delta = 0) for add/remove (Dwork & Roth 2014, Thm. 3.6). The
classifier (a softmax over inner products with the normalised noisy sums) is post-processing.

Its params entry declares the mechanism, so the black-box audit tests the Laplace trade-off curve:

    - {name: laplace_sums, kind: python, target: "examples/laplace_trainer.py:train",
       options: {epsilon: 1.0}, claimed_epsilon: 1.0, claimed_delta: 0,
       mechanism: {kind: laplace, scale: 1.0}}
"""

from __future__ import annotations

import numpy as np


class NoisySums:
    """Class directions (C, d); ``predict_proba`` = softmax(x · s_c / ‖s_c‖ / temperature)."""

    def __init__(self, sums: np.ndarray, temperature: float) -> None:
        self.sums = np.asarray(sums, dtype=np.float64)
        self.temperature = float(temperature)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(self.sums, axis=1, keepdims=True)
        z = np.asarray(X, dtype=np.float64) @ (self.sums / np.maximum(norms, 1e-12)).T / self.temperature
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"sums": self.sums, "temperature": np.array([self.temperature])}


def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, epsilon: float = 1.0,
          temperature: float = 0.1) -> NoisySums:
    """Protocol: (X (n, d), y (n,), n_classes, seed, **options) -> object with predict_proba."""
    if not epsilon > 0:
        raise ValueError(f"options.epsilon must be > 0, got {epsilon!r}")
    X = np.asarray(X, dtype=np.float64)
    l1 = np.abs(X).sum(axis=1, keepdims=True)
    clipped = X / np.maximum(l1, 1.0)  # L1 norm <= 1
    sums = np.zeros((n_classes, X.shape[1]))
    np.add.at(sums, np.asarray(y, dtype=np.int64), clipped)
    rng = np.random.default_rng(seed)
    return NoisySums(sums + rng.laplace(0.0, 1.0 / epsilon, size=sums.shape), temperature)


def load(state: dict[str, np.ndarray], n_classes: int, epsilon: float = 1.0, temperature: float = 0.1) -> NoisySums:
    """Rebuild the model from its saved state (the spec's ``loader``)."""
    return NoisySums(state["sums"], float(state["temperature"][0]))
