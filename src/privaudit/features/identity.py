"""The ``identity`` backbone: features (or flattened pixels) standardized per column.

The column statistics are a fitted part of the feature map. They are fitted on rows that are not
under audit (the Reserved rows, passed as ``fit_rows`` by the featurize stage): a mean and standard
deviation taken over the Defender rows would carry information about every Defender row into the
features of every other row, outside the recipe whose privacy the audit measures.
"""

from __future__ import annotations

import numpy as np


def standardize(X: np.ndarray, fit_rows: np.ndarray | None = None) -> np.ndarray:
    """Z-score every column of ``X`` with statistics of the rows ``fit_rows``; columns that are
    constant over those rows come out as 0 for every row.

    Images ``(n, C, H, W)`` are first flattened to ``(n, C*H*W)`` pixels. Statistics are
    taken over the fitted rows in float64 (population std, ddof=0), so the result depends only
    on the values and is bit-for-bit reproducible. A column is constant when its max equals
    its min over the fitted rows (exact; no tolerance that could turn rounding noise into huge
    values).

    Args:
        X: ``(n, d)`` or ``(n, C, H, W)`` finite real array, ``n >= 1``.
        fit_rows: ``(n,)`` boolean mask of the rows the statistics come from: rows that are not
            under audit (the pipeline passes the Reserved rows). ``None`` fits on all rows, which
            is only right when no row of ``X`` is under audit.

    Returns:
        ``(n, d)`` float32 array.

    Raises:
        ValueError: empty input, non-finite values, or a ``fit_rows`` mask of the wrong shape
            or with no row.
    """
    flat = np.asarray(X).reshape(X.shape[0], -1).astype(np.float64, copy=False)
    if flat.shape[0] == 0 or flat.shape[1] == 0:
        raise ValueError(f"featurize.backbone='identity' needs at least one row and column, got shape {X.shape}")
    if not np.isfinite(flat).all():
        bad = int((~np.isfinite(flat)).any(axis=1).sum())
        raise ValueError(f"featurize.backbone='identity': {bad} rows contain NaN or inf")
    if fit_rows is None:
        fit = flat
    else:
        mask = np.asarray(fit_rows)
        if mask.dtype != np.bool_ or mask.shape != (flat.shape[0],):
            raise ValueError(f"featurize: fit_rows must be a boolean mask of shape ({flat.shape[0]},), "
                             f"got dtype {mask.dtype} and shape {mask.shape}")
        if not mask.any():
            raise ValueError("featurize: no row to fit the identity backbone's statistics on "
                             "(the split has no Reserved row; lower split.defender_fraction)")
        fit = flat[mask]
    mean = fit.mean(axis=0)
    std = fit.std(axis=0)
    constant = (fit.max(axis=0) == fit.min(axis=0)) | (std == 0.0)
    safe_std = np.where(constant, 1.0, std)
    out = (flat - mean) / safe_std
    out[:, constant] = 0.0
    return out.astype(np.float32)
