"""Canary designs for Lifted-DP audits (Pillutla et al. 2023, §5 and App. D).

* ``mislabel``: a Reserved sample with a uniformly random wrong label (data poisoning); with
  two classes the wrong label is the other one (a label flip).
* ``clipbkd``: LiDP App. D.1, eq. (23) — uniform over the p tail right-singular vectors
  ``α v_1..α v_p`` of the Defender feature matrix (smallest singular values), each with the label
  ``y*(α v_j)`` of highest loss under reference models trained without canaries.
* ``random_gradient``: LiDP App. D.2 — a canary *gradient* c uniform on the sphere of radius r in
  parameter space; its loss is ``⟨c, θ⟩`` (so the trainer adds c when it samples the canary) and
  the test statistic is ``⟨c, θ_T − θ_0⟩ ≤ τ`` (the auditor knows the initialisation θ_0).

The last two need the batched trainer (parameter access / inserted gradients), so they are only
available for ``kind: torch_mlp`` and ``kind: dp_sgd`` defenders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANARY_TYPES = ("mislabel", "clipbkd", "random_gradient")
BATCHED_ONLY = ("clipbkd", "random_gradient")


def wrong_labels(y: np.ndarray, n_classes: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct labels ≠ y[i] per row, uniformly at random. Shape (len(y), count).

    With ``n_classes = 2`` and ``count = 1`` this is the other label (``1 - y``).
    """
    if count > n_classes - 1:
        raise ValueError(f"need {count} distinct wrong labels but only {n_classes - 1} exist "
                         f"({n_classes} classes)")
    keys = rng.random((len(y), n_classes))
    keys[np.arange(len(y)), y] = np.inf
    return np.argsort(keys, axis=1)[:, :count]


@dataclass(frozen=True)
class CanaryDraw:
    """K + m canaries of one trial: data canaries (X, y) or gradient canaries (grad).

    Attributes:
        X: (K+m, d) float32 inputs, or None for gradient canaries.
        y: (K+m,) int64 labels, or None.
        grad: (K+m, P) float32 canary gradients, or None for data canaries.
    """

    X: np.ndarray | None = None
    y: np.ndarray | None = None
    grad: np.ndarray | None = None


def draw_mislabel(pool_X: np.ndarray, pool_y: np.ndarray, n_classes: int, count: int,
                  rng: np.random.Generator) -> CanaryDraw:
    """``count`` i.i.d. canaries: a pool (Reserved) sample with a uniformly random wrong label."""
    pick = rng.integers(0, len(pool_y), size=count)
    labels = wrong_labels(pool_y[pick], n_classes, 1, rng)[:, 0]
    return CanaryDraw(X=pool_X[pick].astype(np.float32), y=labels.astype(np.int64))


def tail_singular_vectors(X: np.ndarray, p: int) -> np.ndarray:
    """(p, d) right-singular vectors of X with the p smallest singular values (v_1 first, LiDP eq. 23)."""
    if p < 1 or p > min(X.shape):
        raise ValueError(f"lidp.clipbkd_pool={p} must be in [1, min(n, d) = {min(X.shape)}]")
    _, _, vt = np.linalg.svd(np.asarray(X, dtype=np.float64), full_matrices=False)
    return vt[::-1][:p].astype(np.float32)


def draw_clipbkd(vectors: np.ndarray, labels: np.ndarray, alpha: float, count: int,
                 rng: np.random.Generator) -> CanaryDraw:
    """``count`` i.i.d. canaries uniform over ``(α v_j, y*_j)`` (LiDP App. D.1, eq. 23)."""
    pick = rng.integers(0, len(vectors), size=count)
    return CanaryDraw(X=(alpha * vectors[pick]).astype(np.float32), y=labels[pick].astype(np.int64))


def draw_random_gradient(n_params: int, radius: float, count: int, rng: np.random.Generator) -> CanaryDraw:
    """``count`` canary gradients uniform on the sphere of ``radius`` in R^P (LiDP App. D.2)."""
    g = rng.standard_normal((count, n_params))
    g *= radius / np.linalg.norm(g, axis=1, keepdims=True)
    return CanaryDraw(grad=g.astype(np.float32))
