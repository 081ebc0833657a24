"""The per-sample cross-entropy of predicted probabilities — one definition for every audit.

Used for the defenders' per-sample outputs (``outputs.parquet``'s ``loss``), the LTU loss
attackers and Theorem 1 bound (Pedersen et al. 2022), the sequential LiDP canary losses and the
one-run audit's scores. Before issue 16 three copies clipped p(y|x) at 1e-12 (capping every loss
at 27.63 and tying the most confidently wrong samples) or at 1e-300; now one floor,
:data:`PROBA_FLOOR`, only keeps ``log(0)`` finite.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PROBA_FLOOR", "cross_entropy"]

#: smallest probability used in ``−log p`` (a probability of exactly 0 gives loss 690.8, not inf)
PROBA_FLOOR = 1e-300


def cross_entropy(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample log loss ``−log p(y_i | x_i)``, shape (n,), from ``proba`` (n, C) and labels ``y`` (n,)."""
    proba = np.asarray(proba)
    y = np.asarray(y)
    if proba.ndim != 2 or y.shape != (proba.shape[0],):
        raise ValueError(f"proba must be (n, C) and y (n,), got {proba.shape} and {y.shape}")
    p = proba[np.arange(len(y)), y]
    return -np.log(np.clip(p, PROBA_FLOOR, 1.0))
