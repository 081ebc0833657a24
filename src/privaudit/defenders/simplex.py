"""Euclidean projection onto the probability simplex (Malek et al. 2021, App. D.1, Algorithm 4).

Duchi et al. 2008: sort ``o`` decreasingly as ``s_1 ≥ … ≥ s_C``, find
``k = max{j : s_j > (Σ_{i≤j} s_i − 1)/j}``, ``u = (Σ_{i≤k} s_i − 1)/k`` and return
``max(o − u, 0)``: the unique minimiser of ``‖o' − o‖₂`` over ``{o' ≥ 0, Σ o' = 1}``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def project_simplex(o: ArrayLike) -> NDArray[np.float64]:
    """Project each row of ``o`` (shape (C,) or (n, C)) onto the probability simplex (Alg. 4).

    >>> project_simplex([0.5, 0.5, 0.5]).round(4).tolist()
    [0.3333, 0.3333, 0.3333]
    >>> project_simplex([2.0, 0.0]).tolist()
    [1.0, 0.0]
    """
    a = np.asarray(o, dtype=np.float64)
    if a.ndim not in (1, 2) or a.shape[-1] < 1 or not np.all(np.isfinite(a)):
        raise ValueError(f"o must be a finite (C,) or (n, C) array, got shape {a.shape}")
    rows = np.atleast_2d(a)
    s = -np.sort(-rows, axis=1)
    css = np.cumsum(s, axis=1) - 1.0
    j = np.arange(1, rows.shape[1] + 1)
    k = np.sum(s > css / j, axis=1)  # the condition holds exactly for j = 1..k
    u = css[np.arange(len(rows)), k - 1] / k
    out = np.maximum(rows - u[:, None], 0.0)
    return out[0] if a.ndim == 1 else out
