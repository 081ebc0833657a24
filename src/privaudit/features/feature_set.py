"""The features a defender trains on, aligned with the Defender/Reserved membership table.

:class:`FeatureSet` is what the featurize and split stages produce, read back by
:func:`load_feature_set` (``data/features/features.npz`` + ``meta.json`` and
``data/split/membership.parquet``; nothing is unpickled) for the defenders, canaries and audits.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privaudit.artifacts import read_json
from privaudit.data.split import read_membership

__all__ = ["FeatureSet", "FeatureShape", "align_features", "load_feature_set", "read_feature_files", "read_feature_shape"]


@dataclass(frozen=True)
class FeatureSet:
    """Features aligned with the membership table.

    Attributes:
        X: (n, d) float32 embeddings.
        y: (n,) int64 labels.
        ids: (n,) str sample ids.
        is_defender: (n,) bool, True for Defender (training) samples.
        n_classes: number of classes C.
    """

    X: np.ndarray
    y: np.ndarray
    ids: np.ndarray
    is_defender: np.ndarray
    n_classes: int

    @property
    def defender(self) -> tuple[np.ndarray, np.ndarray]:
        return self.X[self.is_defender], self.y[self.is_defender]

    @property
    def reserved(self) -> tuple[np.ndarray, np.ndarray]:
        return self.X[~self.is_defender], self.y[~self.is_defender]


def align_features(
    X: np.ndarray, feature_ids: np.ndarray, membership: pd.DataFrame, n_classes: int
) -> FeatureSet:
    """Join features (by id) with the membership table (id, label, role); ids must match exactly."""
    ids = np.asarray(feature_ids).astype(str)
    if len(ids) != len(X):
        raise ValueError(f"features have {len(X)} rows but {len(ids)} ids")
    m = membership.set_index("id")
    missing = np.setdiff1d(ids, m.index.to_numpy().astype(str))
    extra = np.setdiff1d(m.index.to_numpy().astype(str), ids)
    if len(missing) or len(extra):
        raise ValueError(
            f"features and membership table disagree on ids: {len(missing)} feature ids not in the split "
            f"(e.g. {missing[:3].tolist()}), {len(extra)} split ids without features (e.g. {extra[:3].tolist()})"
        )
    rows = m.loc[ids]
    return FeatureSet(
        X=np.ascontiguousarray(X, dtype=np.float32),
        y=rows["label"].to_numpy(dtype=np.int64, copy=True),  # owned: a read-only view (pandas copy-on-write) warns in torch
        ids=ids,
        is_defender=(rows["role"].to_numpy() == "defender"),
        n_classes=n_classes,
    )


def read_feature_files(features_dir: Path, split_dir: Path) -> tuple[np.ndarray, np.ndarray, dict[str, Any], pd.DataFrame]:
    """Read ``features.npz`` (X (n, d), ids (n,)), ``meta.json`` and ``membership.parquet``.

    Raises:
        FileNotFoundError: a file is missing (names it and the stage that writes it).
        ValueError: a file is truncated or corrupt (names it); nothing is unpickled.
    """
    fpath, mpath = features_dir / "features.npz", features_dir / "meta.json"
    for p in (fpath, mpath):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (run the featurize and split stages: dvc repro)")
    try:
        with np.load(fpath, allow_pickle=False) as z:
            X, ids = z["X"], z["ids"]
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise ValueError(f"{fpath} is truncated or corrupt: {err}") from None
    membership = read_membership(split_dir)
    meta = read_json(mpath)
    return X, ids, meta, membership


@dataclass(frozen=True)
class FeatureShape:
    """What ``data/features/meta.json`` says of the features' shape: ``dim`` features, ``n_classes`` labels."""

    dim: int
    n_classes: int


def read_feature_shape(features_dir: Path) -> FeatureShape:
    """The features' dimension and class count from ``meta.json`` alone (the rows are not read).

    Raises:
        FileNotFoundError: no ``meta.json`` (names it and the stage that writes it).
        ValueError: it lacks ``dim`` or ``n_classes``, or they are not positive integers (names the file).
    """
    path = Path(features_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run the featurize stage: dvc repro featurize)")
    meta = read_json(path)
    try:
        shape = FeatureShape(int(meta["dim"]), int(meta["n_classes"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: needs integer 'dim' and 'n_classes' ({type(err).__name__}: {err}); rerun the "
                         "featurize stage") from None
    if shape.dim < 1 or shape.n_classes < 1:
        raise ValueError(f"{path}: dim={shape.dim} and n_classes={shape.n_classes} must be >= 1; rerun the featurize "
                         "stage")
    return shape


def load_feature_set(features_dir: Path, split_dir: Path) -> FeatureSet:
    """Read the featurize and split outputs into a :class:`FeatureSet` (see :func:`read_feature_files`)."""
    X, ids, meta, membership = read_feature_files(features_dir, split_dir)
    return align_features(X, ids, membership, int(meta["n_classes"]))
