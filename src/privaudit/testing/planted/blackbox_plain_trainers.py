"""Plain DP-SGD trainers (final model only) with planted bugs, for the many-run black-box audit.

A linear softmax head trained by DP-SGD (Abadi et al. 2016) as a plain numpy loop or a plain torch
loop (per-example gradients in closed form in both; no opacus, no hook, no batched trainer): every step a Poisson batch (each row with
probability q = B/n), per-example gradients of the cross-entropy clipped to C (closed form for a
linear head: ‖g_i‖² = ‖p_i − e_{y_i}‖²(‖x_i‖² + 1)), the sum plus N(0, σ²C²) per coordinate, and
the update θ ← θ − η·(sum + noise)/B (``scaling="lr/B"``, opacus semantics) or θ ← θ − η·(sum + noise)
(``scaling="lr"``); T = epochs·round(n/B) steps; initialisation zero or U(−1/√d, 1/√d).
σ is opacus's ``get_noise_multiplier`` (PRV accountant) for the claim (ε, δ) at (q, T).

Bugs (the claim stays (ε, δ)): ``sigma_div4`` (σ/4), ``accountant_10x_n`` (σ calibrated for a data
set 10× larger: q/10 and 10× the steps), ``no_clip``, ``no_noise``, ``noise_once_per_epoch`` (noise
only at the last step of each epoch). :func:`true_epsilon` gives each bug's true ε by the same
accountant (``inf`` for the last three: steps without noise or without a sensitivity bound).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

BUGS = ("correct", "sigma_div4", "accountant_10x_n", "no_clip", "no_noise", "noise_once_per_epoch")
EPOCHS, BATCH, DELTA, CLIP = 20, 64, 1e-5, 1.0


@lru_cache(maxsize=None)
def sigma_for(eps: float, q: float, steps: int, delta: float = DELTA) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(get_noise_multiplier(target_epsilon=eps, target_delta=delta, sample_rate=q, steps=steps,
                                          accountant="prv"))


def recipe_numbers(n: int, eps: float, bug: str) -> tuple[float, float, int]:
    """(σ used, q, T) of the recipe at n rows (calibration at the Defender size n, fixed)."""
    q = BATCH / n
    steps = EPOCHS * max(1, round(n / BATCH))
    if bug == "accountant_10x_n":
        sigma = sigma_for(eps, q / 10, EPOCHS * max(1, round(10 * n / BATCH)))
    else:
        sigma = sigma_for(eps, q, steps)
    if bug == "sigma_div4":
        sigma /= 4
    return sigma, q, steps


def true_epsilon(n: int, eps: float, bug: str) -> float:
    """True ε of the recipe (PRV accountant); inf where a step has no noise or no sensitivity bound."""
    if bug in ("no_clip", "no_noise", "noise_once_per_epoch"):
        return math.inf
    sigma, q, steps = recipe_numbers(n, eps, bug)
    if bug == "correct":
        return eps
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(sigma, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta=DELTA))


@dataclass
class LinearSoftmax:
    W: np.ndarray  # (K, d)
    b: np.ndarray  # (K,)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        z = np.asarray(X, dtype=np.float64) @ self.W.T.astype(np.float64) + self.b
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)


@dataclass(frozen=True)
class PlainTrainer:
    """``train(X, y, seed) -> LinearSoftmax`` for one (claim, bug, framework, init, scaling)."""

    eps: float
    bug: str
    n_classes: int
    n_calibration: int
    framework: str = "numpy"  # numpy | torch
    init: str = "random"  # random | zero
    scaling: str = "lr/B"  # lr/B (η = 0.5) | lr (η = 0.02)

    def __post_init__(self) -> None:
        if self.bug not in BUGS:
            raise ValueError(f"bug must be one of {BUGS}, got {self.bug!r}")
        if self.framework not in ("numpy", "torch") or self.init not in ("random", "zero") or \
                self.scaling not in ("lr/B", "lr"):
            raise ValueError(f"bad trainer variant {self.framework}/{self.init}/{self.scaling}")

    def __call__(self, X: np.ndarray, y: np.ndarray, seed: int) -> LinearSoftmax:
        sigma, q, steps = recipe_numbers(self.n_calibration, self.eps, self.bug)
        per_epoch = max(1, round(self.n_calibration / BATCH))
        if self.framework == "numpy":
            return _train_numpy(X, y, self.n_classes, seed, sigma, q, steps, per_epoch, self.bug, self.init, self.scaling)
        return _train_torch(X, y, self.n_classes, seed, sigma, q, steps, per_epoch, self.bug, self.init, self.scaling)


def _lr_div(scaling: str) -> tuple[float, float]:
    return (0.5, float(BATCH)) if scaling == "lr/B" else (0.02, 1.0)


def _train_numpy(X, y, K, seed, sigma, q, steps, per_epoch, bug, init, scaling) -> LinearSoftmax:
    rng = np.random.default_rng(seed)
    n, d = X.shape
    X = np.asarray(X, dtype=np.float64)
    bound = 1.0 / math.sqrt(d)
    W = np.zeros((K, d)) if init == "zero" else rng.uniform(-bound, bound, (K, d))
    b = np.zeros(K) if init == "zero" else rng.uniform(-bound, bound, K)
    lr, div = _lr_div(scaling)
    onehot = np.eye(K)[y]
    xsq = (X * X).sum(1)
    for t in range(steps):
        idx = np.flatnonzero(rng.random(n) < q)
        gW, gb = np.zeros((K, d)), np.zeros(K)
        if idx.size:
            z = X[idx] @ W.T + b
            z -= z.max(1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(1, keepdims=True)
            r = p - onehot[idx]
            if bug != "no_clip":
                norm = np.sqrt((r * r).sum(1) * (xsq[idx] + 1.0))
                r = r * np.minimum(1.0, CLIP / (norm + 1e-6))[:, None]
            gW, gb = r.T @ X[idx], r.sum(0)
        noisy = bug != "no_noise" and (bug != "noise_once_per_epoch" or (t + 1) % per_epoch == 0)
        if noisy:
            gW = gW + rng.normal(0.0, sigma * CLIP, (K, d))
            gb = gb + rng.normal(0.0, sigma * CLIP, K)
        W -= lr * gW / div
        b -= lr * gb / div
    return LinearSoftmax(W, b)


def _train_torch(X, y, K, seed, sigma, q, steps, per_epoch, bug, init, scaling) -> LinearSoftmax:
    g = torch.Generator().manual_seed(int(seed) % (2**63 - 1))
    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    n, d = Xt.shape
    bound = 1.0 / math.sqrt(d)
    W = torch.zeros(K, d) if init == "zero" else torch.empty(K, d).uniform_(-bound, bound, generator=g)
    b = torch.zeros(K) if init == "zero" else torch.empty(K).uniform_(-bound, bound, generator=g)
    lr, div = _lr_div(scaling)
    onehot = torch.nn.functional.one_hot(yt, K).float()
    xsq = Xt.pow(2).sum(1)
    for t in range(steps):
        idx = torch.nonzero(torch.rand(n, generator=g) < q).flatten()
        gW, gb = torch.zeros(K, d), torch.zeros(K)
        if idx.numel():
            xb = Xt[idx]
            # per-example gradient of the cross-entropy of a linear head: (p_i - e_{y_i}) [x_i, 1]
            r = torch.softmax(xb @ W.T + b, dim=1) - onehot[idx]
            if bug != "no_clip":
                norm = torch.sqrt(r.pow(2).sum(1) * (xsq[idx] + 1.0))
                r = r * torch.clamp(CLIP / (norm + 1e-6), max=1.0)[:, None]
            gW, gb = r.T @ xb, r.sum(0)
        noisy = bug != "no_noise" and (bug != "noise_once_per_epoch" or (t + 1) % per_epoch == 0)
        if noisy:
            gW = gW + sigma * CLIP * torch.randn(K, d, generator=g)
            gb = gb + sigma * CLIP * torch.randn(K, generator=g)
        W -= lr * gW / div
        b -= lr * gb / div
    return LinearSoftmax(W.double().numpy(), b.double().numpy())
