"""Input-space canaries as ordinary training rows (any trainer; black-box auditing).

ClipBKD-style (Jagielski, Ullman & Oprea 2020, "Auditing Differentially Private Machine Learning:
How Private is Private SGD?", NeurIPS 2020, Sec. 3 / Algorithm 2): a poisoning row whose features
lie in a direction of *low variance* of the training features, scaled by alpha, so that the
model's behaviour on it is driven by the poison alone, with a label that no clean row supports.
Unlike :mod:`privaudit.canaries.designs` (ClipBKD for the batched kinds, LiDP App. D.1) these
canaries are plain ``(x, y)`` rows appended to ``(X, y)`` before a normal ``fit``, so any trainer
(sklearn, torch, a user's ``kind: python`` recipe) can be audited from its final model alone.

With many canaries in one run (Steinke, Nasr & Jagielski 2023), canaries that share a direction
interfere: including one changes the loss of the others.  Designs (all inside the span of the
``tail_dim`` right-singular vectors of X with the smallest singular values, as
:func:`privaudit.canaries.designs.tail_singular_vectors` but from the eigenvectors of the d x d
Gram matrix X^T X under a one-thread BLAS limit — an (n, d) SVD on a busy 2-core machine took
1.6 s with threaded BLAS against 1 ms for this):

* ``tail_cells`` (default): x = alpha * v_j for a tail singular vector v_j, and every canary gets
  its own (direction, label) cell: the p * n_classes cells are used in a random order, each once
  before any is reused (``labels`` is ignored).  Canaries in different directions are orthogonal,
  and canaries in one direction differ in label, so a linear model stores each canary in its own
  weight entry; m <= p * n_classes avoids duplicates (see :func:`cell_capacity`);
* ``tail_random``: x = alpha * u, u uniform on the unit sphere of the tail subspace —
  nearly orthogonal canaries when ``tail_dim`` is large;
* ``tail_sign``: x = alpha * V^T s / sqrt(p), s a uniformly random sign vector (+-1)^p;
* ``tail_aligned``: x = alpha * v_j, v_j cycling through the tail vectors (the original ClipBKD
  point, many canaries per direction).

Labels (``labels``): ``balanced`` gives every class (almost) the same number of canaries in a
random order, so canaries sharing a direction mostly differ in label; ``random`` draws them
uniformly.  The scale alpha is ``scale`` times the median row norm of X (unit-free).
Measured power of the designs on digits: ``benchmarks/results/one_run_digits.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from threadpoolctl import threadpool_limits

__all__ = ["INPUT_DESIGNS", "LABEL_RULES", "InputCanaries", "make_input_canaries", "default_tail_dim",
           "cell_capacity", "tail_basis"]

INPUT_DESIGNS = ("tail_cells", "tail_random", "tail_sign", "tail_aligned")
LABEL_RULES = ("balanced", "random")


def default_tail_dim(d: int) -> int:
    """Tail subspace dimension used when none is given: a quarter of the features, at least 1."""
    return max(1, d // 4)


def tail_basis(X: np.ndarray, p: int) -> np.ndarray:
    """(p, d) orthonormal right-singular vectors of X with the p smallest singular values (smallest first)."""
    Xd = np.asarray(X, dtype=np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        _, vecs = np.linalg.eigh(Xd.T @ Xd)  # eigenvalues ascending = squared singular values
    return np.ascontiguousarray(vecs[:, :p].T)


def cell_capacity(d: int, n_classes: int, tail_dim: int | None = None) -> int:
    """Number of distinct (direction, label) cells of the ``tail_cells`` design."""
    return (default_tail_dim(d) if tail_dim is None else int(tail_dim)) * int(n_classes)


@dataclass(frozen=True)
class InputCanaries:
    """m canary rows and how they were made.

    Attributes:
        X: (m, d) float32 canary features.
        y: (m,) int64 canary labels.
        design: one of :data:`INPUT_DESIGNS`.
        labels: one of :data:`LABEL_RULES`.
        tail_dim: dimension p of the tail subspace.
        scale: alpha in units of the median row norm of the training features.
        alpha: the canaries' feature norm.
    """

    X: np.ndarray
    y: np.ndarray
    design: str
    labels: str
    tail_dim: int
    scale: float
    alpha: float

    def describe(self) -> str:
        return (f"{len(self.y)} input canaries '{self.design}' in the {self.tail_dim}-dim tail singular "
                f"subspace, norm {self.alpha:.3g} ({self.scale:g} x median row norm), {self.labels} labels")


def make_input_canaries(X: np.ndarray, n_classes: int, count: int, rng: np.random.Generator, *,
                        design: str = "tail_cells", scale: float = 4.0, tail_dim: int | None = None,
                        labels: str = "balanced") -> InputCanaries:
    """Draw ``count`` canary rows for the training features ``X`` (see module docstring).

    Args:
        X: (n, d) training features (the rows the trainer will see besides the canaries).
        n_classes: number of classes; labels are drawn from ``range(n_classes)``.
        count: number m of canaries (>= 1).
        rng: the numpy Generator all randomness comes from.
        design: one of :data:`INPUT_DESIGNS`.
        scale: canary norm as a multiple of the median row norm of X (> 0).
        tail_dim: dimension of the tail subspace (1 <= tail_dim <= d); default d // 4.
        labels: one of :data:`LABEL_RULES`.

    Raises:
        ValueError: naming the bad argument.
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D (n, d) array, got shape {X.shape}")
    if design not in INPUT_DESIGNS:
        raise ValueError(f"design must be one of {INPUT_DESIGNS}, got {design!r}")
    if labels not in LABEL_RULES:
        raise ValueError(f"labels must be one of {LABEL_RULES}, got {labels!r}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be an integer >= 1, got {count!r}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    n, d = X.shape
    p = default_tail_dim(d) if tail_dim is None else tail_dim
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 1 <= p <= d:
        raise ValueError(f"tail_dim must be an integer in [1, d = {d}], got {tail_dim!r}")
    p = int(p)
    V = tail_basis(X, p)  # (p, d), orthonormal rows
    norms = np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)
    ref = float(np.median(norms))
    alpha = float(scale) * (ref if ref > 0 else 1.0)

    yc: np.ndarray | None = None
    if design == "tail_cells":
        reps = -(-count // (p * n_classes))
        cells = np.concatenate([rng.permutation(p * n_classes) for _ in range(reps)])[:count]
        coef = np.eye(p)[cells // n_classes]
        yc = cells % n_classes
    elif design == "tail_random":
        coef = rng.standard_normal((count, p))
        coef /= np.linalg.norm(coef, axis=1, keepdims=True)
    elif design == "tail_sign":
        coef = rng.choice(np.array([-1.0, 1.0]), size=(count, p)) / np.sqrt(p)
    else:  # tail_aligned
        coef = np.eye(p)[rng.permutation(count) % p]
    Xc = alpha * coef @ V

    if yc is not None:
        pass
    elif labels == "balanced":
        yc = rng.permutation(np.arange(count) % n_classes)
    else:
        yc = rng.integers(0, n_classes, size=count)
    return InputCanaries(X=Xc.astype(np.float32), y=yc.astype(np.int64), design=design, labels=labels,
                         tail_dim=p, scale=float(scale), alpha=alpha)
