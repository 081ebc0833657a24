"""Shared helpers turning arrays into the DataFrames the GX suites validate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

FINITE_MAX = float(np.finfo(np.float64).max)  # `<= FINITE_MAX` rejects +inf (GX skips NaN as null)
CHUNK_ROWS = 4096


def nonfinite_per_row(X: np.ndarray) -> np.ndarray:
    """Count of NaN/inf entries in each row of ``X`` (shape ``(n, ...)``) → ``(n,)`` int64.

    Non-numeric arrays count every entry of a row that cannot be read as a float.
    """
    arr = np.asarray(X)
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    flat = arr.reshape(arr.shape[0], -1) if arr.shape[0] else arr.reshape(0, 1)
    if flat.dtype.kind in "fc":  # in row chunks: no float64 copy of a large image array
        out = np.empty(flat.shape[0], dtype=np.int64)
        for start in range(0, flat.shape[0], CHUNK_ROWS):
            out[start:start + CHUNK_ROWS] = (~np.isfinite(flat[start:start + CHUNK_ROWS])).sum(axis=1)
        return out
    if flat.dtype.kind in "iub":
        return np.zeros(flat.shape[0], dtype=np.int64)
    values = pd.DataFrame(flat).apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    return (~np.isfinite(values)).sum(axis=1).astype(np.int64)


def ids_column(ids: Any, n: int | None = None) -> pd.Series:
    """Sample ids as an object Series with empty strings/``None``/NaN as null, padded to ``n`` rows."""
    values = list(np.asarray(ids, dtype=object).ravel()) if ids is not None else []
    cleaned = [None if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() in ("", "nan", "None")
               else str(v) for v in values]
    if n is not None and len(cleaned) < n:
        cleaned += [None] * (n - len(cleaned))
    return pd.Series(cleaned[: n if n is not None else len(cleaned)], dtype=object)


def as_numeric(values: Any) -> np.ndarray:
    """Flatten to float64; entries that are not numbers become NaN (reported as null)."""
    arr = np.asarray(values)
    try:
        return arr.astype(np.float64).ravel()
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(arr.ravel(), dtype=object), errors="coerce").to_numpy(dtype=np.float64)
