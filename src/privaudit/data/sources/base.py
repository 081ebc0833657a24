"""The in-memory form every data source produces, and the helpers sources share.

A :class:`SourceData` holds one data set as plain numpy arrays:

- ``X``: ``(n, d)`` float32 tabular features, or ``(n, C, H, W)`` float32 images in ``[0, 1]``;
- ``y``: ``(n,)`` int64 labels in ``[0, n_classes)``;
- ``ids``: ``(n,)`` numpy unicode strings, unique and stable across runs (e.g. ``"digits-00042"``);
- ``meta``: a JSON-serialisable dict with at least ``name``, ``n_classes``, ``class_names``,
  ``modality`` (``"tabular"`` or ``"image"``), ``image_shape`` (``[C, H, W]`` or ``None``)
  and ``origin`` (where the data came from).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

REQUIRED_META_KEYS: tuple[str, ...] = (
    "name",
    "n_classes",
    "class_names",
    "modality",
    "image_shape",
    "origin",
)


class DataSourceError(ValueError):
    """A data source was misconfigured or its files could not be read.

    Messages name the params key (``dataset.name``, ``dataset.path``, ``dataset.label_column``,
    ``dataset.max_samples``) or the file, the bad value, and what was expected.
    """


@dataclass(frozen=True)
class SourceData:
    """One data set: features or images, labels, stable ids and JSON metadata.

    Attributes:
        X: ``(n, d)`` float32 features (tabular) or ``(n, C, H, W)`` float32 images in [0, 1].
        y: ``(n,)`` int64 labels in ``[0, meta["n_classes"])``.
        ids: ``(n,)`` numpy unicode array of unique, stable sample ids.
        meta: JSON-serialisable metadata (see :data:`REQUIRED_META_KEYS`).

    Construction validates dtypes, shapes, label range, id uniqueness and that ``meta``
    serialises to JSON; a violation raises :class:`DataSourceError`.
    """

    X: np.ndarray
    y: np.ndarray
    ids: np.ndarray
    meta: dict[str, Any]

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.y.shape[0])

    def subset(self, index: np.ndarray) -> SourceData:
        """The samples at integer positions ``index`` (shape ``(m,)``), in that order."""
        return SourceData(
            X=np.ascontiguousarray(self.X[index]),
            y=np.ascontiguousarray(self.y[index]),
            ids=np.ascontiguousarray(self.ids[index]),
            meta=dict(self.meta),
        )


def _validate(data: SourceData) -> None:
    X, y, ids, meta = data.X, data.y, data.ids, data.meta
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    where = f"data source {name!r}"
    if not isinstance(meta, dict):
        raise DataSourceError(f"{where}: meta must be a dict, got {type(meta).__name__}")
    missing = [k for k in REQUIRED_META_KEYS if k not in meta]
    if missing:
        raise DataSourceError(f"{where}: meta lacks keys {missing}")
    for arr_name, arr, dtype in (("X", X, np.float32), ("y", y, np.int64)):
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype:
            got = getattr(arr, "dtype", type(arr).__name__)
            raise DataSourceError(f"{where}: {arr_name} must be a {np.dtype(dtype)} array, got {got}")
    if not isinstance(ids, np.ndarray) or ids.dtype.kind != "U":
        got = getattr(ids, "dtype", type(ids).__name__)
        raise DataSourceError(f"{where}: ids must be a numpy unicode array, got {got}")
    modality = meta["modality"]
    if modality == "tabular" and X.ndim != 2:
        raise DataSourceError(f"{where}: tabular X must be (n, d), got shape {X.shape}")
    if modality == "image":
        if X.ndim != 4:
            raise DataSourceError(f"{where}: image X must be (n, C, H, W), got shape {X.shape}")
        if list(X.shape[1:]) != list(meta["image_shape"] or []):
            raise DataSourceError(
                f"{where}: meta image_shape {meta['image_shape']} != X shape {list(X.shape[1:])}"
            )
    if modality not in ("tabular", "image"):
        raise DataSourceError(f"{where}: meta modality must be 'tabular' or 'image', got {modality!r}")
    n = X.shape[0]
    if y.shape != (n,) or ids.shape != (n,):
        raise DataSourceError(
            f"{where}: X has {n} rows but y has shape {y.shape} and ids shape {ids.shape}"
        )
    if X.size and not np.isfinite(X).all():
        raise DataSourceError(f"{where}: X contains NaN or inf")
    if modality == "image" and X.size and (X.min() < 0.0 or X.max() > 1.0):
        raise DataSourceError(f"{where}: image X must lie in [0, 1], got [{X.min()}, {X.max()}]")
    n_classes = meta["n_classes"]
    if len(meta["class_names"]) != n_classes:
        raise DataSourceError(f"{where}: {len(meta['class_names'])} class_names for {n_classes} classes")
    if n and (y.min() < 0 or y.max() >= n_classes):
        raise DataSourceError(f"{where}: labels outside [0, {n_classes}): min {y.min()}, max {y.max()}")
    if len(np.unique(ids)) != n:
        raise DataSourceError(f"{where}: ids are not unique")
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as exc:
        raise DataSourceError(f"{where}: meta is not JSON-serialisable: {exc}") from exc


def make_ids(prefix: str, n: int) -> np.ndarray:
    """Ids ``"<prefix>-00000"`` … for ``n`` samples, zero-padded to at least 5 digits.

    Returns:
        ``(n,)`` numpy unicode array.
    """
    width = max(5, len(str(max(n - 1, 0))))
    return np.array([f"{prefix}-{i:0{width}d}" for i in range(n)], dtype=np.str_)


def encode_labels(raw: Sequence[Any] | np.ndarray, where: str) -> tuple[np.ndarray, list[str], dict[str, int]]:
    """Map arbitrary label values to ``0..C-1``.

    Labels that all parse as numbers are ordered numerically (so ``"2" < "10"``), otherwise
    as strings. Returns ``(y, class_names, mapping)`` with ``y`` of shape ``(n,)`` int64,
    ``class_names[c]`` the original label (as a string) of class ``c`` and ``mapping`` its
    inverse.
    """
    values = np.asarray(raw, dtype=object).ravel()
    as_str = np.asarray([_tidy_number(str(v).strip()) for v in values], dtype=np.str_)
    if as_str.size == 0:
        raise DataSourceError(f"{where}: no labels")
    missing = np.flatnonzero(np.isin(as_str, ["", "nan", "None"]))
    if missing.size:
        rows = ", ".join(str(int(r)) for r in missing[:5])
        rows += f" and {missing.size - 5} more" if missing.size > 5 else ""
        raise DataSourceError(f"{where}: missing label values in {missing.size} row(s) (data rows {rows}, counted "
                              "from 0 after the header): fill them in or drop those rows")
    uniques = np.unique(as_str).tolist()
    try:
        numeric = {u: float(u) for u in uniques}
        ordered = sorted(uniques, key=lambda u: (numeric[u], u))
    except ValueError:
        ordered = sorted(uniques)
    mapping = {u: i for i, u in enumerate(ordered)}
    y = np.array([mapping[s] for s in as_str], dtype=np.int64)
    return y, ordered, mapping


def _tidy_number(text: str) -> str:
    """``"3.0"`` → ``"3"`` so float-typed integer labels read naturally; other text unchanged."""
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() and "." in text else text


def check_max_samples(max_samples: int | None) -> None:
    """Raise DataSourceError unless ``max_samples`` is ``None`` or a positive integer."""
    if max_samples is None:
        return
    if isinstance(max_samples, bool) or not isinstance(max_samples, (int, np.integer)) or max_samples < 1:
        raise DataSourceError(f"dataset.max_samples must be a positive integer or null, got {max_samples!r}")


def subsample_index(n: int, max_samples: int | None, rng: np.random.Generator | None) -> np.ndarray | None:
    """Sorted positions of a uniform subsample of size ``max_samples``, or ``None`` for all.

    Raises:
        DataSourceError: ``max_samples`` not a positive int, or a subsample is needed and
            no ``rng`` was given (the library never seeds randomness itself).
    """
    check_max_samples(max_samples)
    if max_samples is None or max_samples >= n:
        return None
    if rng is None:
        raise DataSourceError(
            f"dataset.max_samples={max_samples} < {n} samples needs a numpy Generator (rng) "
            "to draw the subsample; pass one seeded from base.seed"
        )
    return np.sort(rng.choice(n, size=int(max_samples), replace=False))
