"""The ``identity`` backbone: features (or flattened pixels) standardized per column."""

from __future__ import annotations

import numpy as np


def standardize(X: np.ndarray) -> np.ndarray:
    """Z-score every column of ``X``; columns that are constant come out as 0.

    Images ``(n, C, H, W)`` are first flattened to ``(n, C*H*W)`` pixels. Statistics are
    taken over all ``n`` rows in float64 (population std, ddof=0), so the result depends only
    on the values and is bit-for-bit reproducible. A column is constant when its max equals
    its min (exact; no tolerance that could turn rounding noise into huge values).

    Args:
        X: ``(n, d)`` or ``(n, C, H, W)`` finite real array, ``n >= 1``.

    Returns:
        ``(n, d)`` float32 array.

    Raises:
        ValueError: empty input or non-finite values.
    """
    flat = np.asarray(X).reshape(X.shape[0], -1).astype(np.float64, copy=False)
    if flat.shape[0] == 0 or flat.shape[1] == 0:
        raise ValueError(f"featurize.backbone='identity' needs at least one row and column, got shape {X.shape}")
    if not np.isfinite(flat).all():
        bad = int((~np.isfinite(flat)).any(axis=1).sum())
        raise ValueError(f"featurize.backbone='identity': {bad} rows contain NaN or inf")
    mean = flat.mean(axis=0)
    std = flat.std(axis=0)
    constant = (flat.max(axis=0) == flat.min(axis=0)) | (std == 0.0)
    safe_std = np.where(constant, 1.0, std)
    out = (flat - mean) / safe_std
    out[:, constant] = 0.0
    return out.astype(np.float32)
