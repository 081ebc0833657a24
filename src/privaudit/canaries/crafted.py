"""Canaries crafted in feature space for a recipe, and the black-box score that is optimal for them.

Design (Jagielski et al. 2020 "Auditing DP ML: how private is private SGD?" §4, ClipBKD: canaries
along the data's low-variance directions; Steinke et al. 2024 "The Last Iterate Advantage",
arXiv:2410.06186, §3: for a linear model the last iterate along a direction no data uses holds
the canary's whole sum of clipped gradients plus noise):

* **direction** v: the right singular vector of the (uncentered) feature matrix with the smallest
  singular value; the data's gradients ``(p_i − e_{y_i}) x_iᵀ`` of a linear softmax head then have
  (almost) no component on the weights' column ``W v``, so only the canary and the noise move it.
  On digits (standardized pixels) this is a constant pixel column (0, 32 or 39).
* **point** x = base + s·v, with base the data mean with its v-component removed.
* **scale** s: large enough that the canary's gradient stays clipped, small enough that the
  noise on its logits does not saturate its softmax. Its weight-gradient has norm
  ``‖p − e_y‖·s`` and its bias-gradient ``‖p − e_y‖``; at a uniform softmax ``‖p − e_y‖ = √(1 − 1/K)``.
  :func:`clipped_scale` picks s with ``√(1 − 1/K)·√(s² + 1) = margin·C`` (margin 3: for K = 10,
  C = 1, s = 3: 90 % of the clipped norm² goes to ``W v``, clipping holds while p_y ≲ 0.8).
  Measured on the digits DP-SGD head (1,000 runs per side): μ̂ = 0.21 / 0.26 / 0.24 at s = 1 / 3 / 10
  at ε = 1 (heuristic ceiling 0.257), 0.96 / 1.07 / 1.09 at s = 1.5 / 3 / 6 at ε = 8 (ceiling 1.175)
  (``benchmarks/results/blackbox_canary_scale_digits.txt``). For a trainer that does not clip, the
  canary's gradient grows with s: a larger s (e.g. 30) finds that bug with fewer runs.
* **label**: the least frequent class of the data (its bias is the smallest, so its softmax
  saturates last).
* **score**: the change of the centered log-probabilities between the canary point and the base
  point, projected on ``u = (e_y − 1/K)/‖e_y − 1/K‖``. For a linear head this is exactly
  ``s·⟨u, W v⟩`` (the bias and every other feature cancel; log-probabilities and logits differ by a
  per-query constant that centering removes), so softmax saturation does not flatten the score as it
  flattens a probability or a loss; ``u`` is the direction of the canary's clipped gradient at a
  uniform softmax. It only needs ``predict_proba`` at two points (black-box).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["CraftedCanary", "ProbaModel", "canary_scores", "clipped_scale", "craft_canary", "score_model"]

PROBA_FLOOR = 1e-300
"""Probabilities are clipped at this before the logarithm (a float64 softmax underflows beyond ~745)."""


class ProbaModel(Protocol):
    def predict_proba(self, X: Any) -> Any: ...


@dataclass(frozen=True)
class CraftedCanary:
    """One crafted canary: the point x (float32), its label, and what the score needs."""

    x: NDArray[np.float32]
    base: NDArray[np.float32]
    direction: NDArray[np.float64]
    scale: float
    label: int
    n_classes: int
    data_energy: float
    """mean over data rows of ⟨x_i, v⟩² (0: a direction no row uses)."""

    @property
    def queries(self) -> NDArray[np.float32]:
        """(2, d) rows to query: the canary point, then the base point."""
        return np.stack([self.x, self.base]).astype(np.float32)

    def describe(self) -> str:
        return (f"crafted input canary: base + {self.scale:g} * v, v = smallest right singular vector of the "
                f"features (mean <x_i, v>^2 = {self.data_energy:.3g}), label {self.label} of {self.n_classes}; "
                f"score = <u, centered log p(canary) - centered log p(base)>, u = centered e_label")


def clipped_scale(n_classes: int, clip_norm: float = 1.0, margin: float = 3.0) -> float:
    """s with ``√(1 − 1/K)·√(s² + 1) = margin·C`` (at least 1): see the module docstring.

    >>> round(clipped_scale(10), 4)
    3.0
    """
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    if not (clip_norm > 0) or not math.isfinite(clip_norm):
        raise ValueError(f"clip_norm must be a finite number > 0, got {clip_norm!r}")
    if not (margin > 0) or not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number > 0, got {margin!r}")
    g2 = (margin * clip_norm) ** 2 / (1.0 - 1.0 / n_classes) - 1.0
    return max(1.0, math.sqrt(max(g2, 0.0)))


def craft_canary(X: NDArray[Any], y: NDArray[Any], n_classes: int, *, scale: float | None = None,
                 label: int | None = None, clip_norm: float = 1.0, margin: float = 3.0) -> CraftedCanary:
    """Craft the canary for features ``X`` (n, d) and labels ``y`` (see the module docstring).

    >>> X = np.random.default_rng(0).normal(size=(50, 4)); X[:, 2] = 0.0
    >>> c = craft_canary(X, np.arange(50) % 3, 3, scale=5.0)
    >>> int(np.argmax(np.abs(c.direction))), c.label, round(float(c.x[2]) ** 2, 3), c.data_energy < 1e-20
    (2, 2, 25.0, True)
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty (n, d) matrix, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds non-finite values; impute or drop them before crafting a canary")
    if n_classes < 2 or y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"labels must lie in [0, n_classes) with n_classes >= 2; got n_classes={n_classes}, "
                         f"labels in [{y.min()}, {y.max()}]")
    _, _, vt = np.linalg.svd(X, full_matrices=False) if X.shape[0] >= X.shape[1] else np.linalg.svd(
        np.vstack([X, np.zeros((X.shape[1] - X.shape[0], X.shape[1]))]), full_matrices=False)
    v = vt[-1]
    v = v / np.linalg.norm(v)
    i = int(np.argmax(np.abs(v)))
    if v[i] < 0:
        v = -v
    energy = float(np.mean((X @ v) ** 2))
    mean = X.mean(0)
    base = mean - (mean @ v) * v
    s = clipped_scale(n_classes, clip_norm, margin) if scale is None else float(scale)
    if not (s > 0) or not math.isfinite(s):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    if label is None:
        counts = np.bincount(y.astype(np.int64), minlength=n_classes)
        label = int(np.argmin(counts))
    if not (0 <= int(label) < n_classes):
        raise ValueError(f"label must lie in [0, {n_classes}), got {label}")
    return CraftedCanary(x=(base + s * v).astype(np.float32), base=base.astype(np.float32), direction=v,
                         scale=s, label=int(label), n_classes=int(n_classes), data_energy=energy)


def canary_scores(p_canary: NDArray[Any], p_base: NDArray[Any], canary: CraftedCanary) -> NDArray[np.float64]:
    """Scores from probabilities at the canary point and the base point, shapes (..., K) → (...).

    >>> c = craft_canary(np.eye(3)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]), 3, scale=2.0)
    >>> logits = np.array([[0.5, 0.0, 0.0]]); p = np.exp(logits) / np.exp(logits).sum()
    >>> round(float(canary_scores(p, np.full((1, 3), 1 / 3), c)[0]), 4)  # label 2: logit of 2 lower
    -0.2041
    """
    pc = np.log(np.maximum(np.asarray(p_canary, dtype=np.float64), PROBA_FLOOR))
    pb = np.log(np.maximum(np.asarray(p_base, dtype=np.float64), PROBA_FLOOR))
    if pc.shape != pb.shape or pc.shape[-1] != canary.n_classes:
        raise ValueError(f"probabilities must both have shape (..., {canary.n_classes}); got {pc.shape} and {pb.shape}")
    d = pc - pb
    d = d - d.mean(-1, keepdims=True)
    u = -np.full(canary.n_classes, 1.0 / canary.n_classes)
    u[canary.label] += 1.0
    u /= np.linalg.norm(u)
    return np.asarray(d @ u, dtype=np.float64)


def score_model(model: ProbaModel, canary: CraftedCanary) -> float:
    """The canary's score on one model through its ``predict_proba`` (two queries)."""
    p = np.asarray(model.predict_proba(canary.queries), dtype=np.float64)
    if p.shape != (2, canary.n_classes):
        raise ValueError(f"predict_proba must return shape (2, {canary.n_classes}) for 2 rows, got {p.shape}")
    return float(canary_scores(p[0], p[1], canary))
