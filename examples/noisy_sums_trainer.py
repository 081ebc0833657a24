"""DP trainers by output perturbation (``kind: python``): noisy class sums, one mechanism per ``noise``.

Every training row is clipped and added to its class's sum; the (C, d) matrix of sums is released
with noise. The classifier (a softmax over inner products with the normalised noisy sums) is
post-processing, so the release is exactly the mechanism below (Dwork & Roth 2014):

* ``noise: laplace`` — rows clipped to L1 norm <= 1, i.i.d. Laplace noise of scale ``1/epsilon``: the
  Laplace mechanism with L1 sensitivity 1 under add/remove, pure ``epsilon``-DP (delta = 0).
  Declare ``mechanism: {kind: laplace, scale: <1/epsilon>}``.
* ``noise: gaussian`` — rows clipped to L2 norm <= 1, Gaussian noise of standard deviation σ, the
  analytic Gaussian mechanism's σ for (epsilon, delta) (Balle & Wang 2018): (epsilon, delta)-DP under
  add/remove. Declare ``mechanism: {kind: gaussian, noise_multiplier: σ}`` (σ is in ``state['sigma']``
  and printed by :func:`gaussian_sigma`).
* ``noise: label_rr`` — label-DP: each label is replaced by k-ary randomized response with
  ``epsilon`` (true label w.p. e^ε/(e^ε + k − 1)), the sums of the (unclipped, noiseless) features
  are taken by noisy label: ``epsilon``-label-DP (``claimed_neighbourhood: replace_label``). Declare
  ``mechanism: {kind: randomized_response, epsilon: <epsilon>, classes: <k>}``.

Its README entry (a pure-DP claim with its mechanism declared)::

    - {name: laplace_sums, kind: python, target: "examples/noisy_sums_trainer.py:train",
       options: {epsilon: 1.0}, claimed_epsilon: 1.0, claimed_delta: 0,
       mechanism: {kind: laplace, scale: 1.0}}
"""

from __future__ import annotations

import math

import numpy as np

NOISES = ("laplace", "gaussian", "label_rr")


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


def gaussian_sigma(epsilon: float, delta: float) -> float:
    """σ of the analytic Gaussian mechanism at (epsilon, delta), L2 sensitivity 1 (Balle & Wang 2018)."""
    from privaudit.mechanisms.gaussian import gaussian_mechanism_sigma

    return float(gaussian_mechanism_sigma(epsilon, delta, sensitivity=1.0))


def _clip(X: np.ndarray, order: int) -> np.ndarray:
    norm = np.linalg.norm(X, ord=order, axis=1, keepdims=True)
    return X / np.maximum(norm, 1.0)


def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, noise: str = "laplace", epsilon: float = 1.0,
          delta: float = 1e-5, temperature: float = 0.1) -> NoisySums:
    """Protocol: (X (n, d), y (n,), n_classes, seed, **options) -> object with predict_proba."""
    if noise not in NOISES:
        raise ValueError(f"options.noise must be one of {NOISES}, got {noise!r}")
    if not epsilon > 0:
        raise ValueError(f"options.epsilon must be > 0, got {epsilon!r}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    rng = np.random.default_rng(seed)
    sums = np.zeros((n_classes, X.shape[1]))
    if noise == "label_rr":
        keep = rng.random(y.size) < math.exp(epsilon) / (math.exp(epsilon) + n_classes - 1)
        other = (y + rng.integers(1, n_classes, y.size)) % n_classes  # uniform over the other k - 1 labels
        np.add.at(sums, np.where(keep, y, other), X)
        return NoisySums(sums, temperature)
    if noise == "laplace":
        np.add.at(sums, y, _clip(X, 1))
        return NoisySums(sums + rng.laplace(0.0, 1.0 / epsilon, size=sums.shape), temperature)
    np.add.at(sums, y, _clip(X, 2))
    return NoisySums(sums + rng.normal(0.0, gaussian_sigma(epsilon, delta), size=sums.shape), temperature)


def load(state: dict[str, np.ndarray], n_classes: int, **options: object) -> NoisySums:
    """Rebuild the model from its saved state (the spec's ``loader``)."""
    return NoisySums(state["sums"], float(state["temperature"][0]))
