"""Defender/Reserved split (Pedersen et al. 2022, Fig. 1a): seeded and stratified by label."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from privaudit.seeding import draw_seed

ROLE_DEFENDER = "defender"
ROLE_RESERVED = "reserved"


def stratified_split(
    ids: np.ndarray, y: np.ndarray, defender_fraction: float, rng: np.random.Generator
) -> pd.DataFrame:
    """Split samples into Defender (training) and Reserved (held-out) sets, per class.

    Args:
        ids: (n,) unique sample ids.
        y: (n,) integer labels.
        defender_fraction: share of each class that goes to the Defender set (``split.defender_fraction``).
        rng: generator the split is drawn from.

    Returns:
        DataFrame with columns ``id``, ``label``, ``role`` (``defender``/``reserved``), one row
        per sample, in the input order.

    Raises:
        ValueError: fraction outside (0, 1), length mismatch, or a class too small to appear
            on both sides (naming the class).
    """
    if not 0.0 < defender_fraction < 1.0:
        raise ValueError(f"split.defender_fraction must be in (0, 1), got {defender_fraction}")
    ids = np.asarray(ids)
    y = np.asarray(y)
    if ids.shape != y.shape or ids.ndim != 1:
        raise ValueError(f"ids {ids.shape} and labels {y.shape} must be 1-d and of equal length")
    classes, counts = np.unique(y, return_counts=True)
    for c, k in zip(classes, counts):
        if k < 2:
            raise ValueError(f"class {c} has {k} sample(s); every class needs >= 2 to appear on both sides")
    n = len(y)
    n_def = int(round(defender_fraction * n))
    if not len(classes) <= n_def <= n - len(classes):
        raise ValueError(
            f"split.defender_fraction={defender_fraction} leaves {n_def} of {n} samples for the Defender "
            f"set; both sides need at least one sample of each of the {len(classes)} classes"
        )
    from sklearn.model_selection import train_test_split  # here: the stages that only read the split need no sklearn

    idx = np.arange(n)
    def_idx, _ = train_test_split(
        idx, train_size=n_def, stratify=y, random_state=draw_seed(rng), shuffle=True
    )
    role = np.full(n, ROLE_RESERVED, dtype=object)
    role[def_idx] = ROLE_DEFENDER
    return pd.DataFrame({"id": ids.astype(str), "label": y.astype(np.int64), "role": role.astype(str)})


MEMBERSHIP_FILE = "membership.parquet"


def read_membership(split_dir: Path) -> pd.DataFrame:
    """Read ``<split_dir>/membership.parquet`` (columns id, label, role); nothing is unpickled.

    Raises:
        FileNotFoundError: the file is missing (names it and the stage that writes it).
        ValueError: the file is truncated or corrupt (names it).
    """
    path = Path(split_dir) / MEMBERSHIP_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run the split stage: dvc repro split)")
    try:
        return pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several types for a truncated/corrupt file
        raise ValueError(f"{path} is truncated or corrupt: {err}") from None


def reserved_mask(membership: pd.DataFrame, ids: np.ndarray) -> np.ndarray:
    """``(n,)`` boolean mask of the samples ``ids`` that are Reserved (not under audit).

    Raises:
        ValueError: an id of ``ids`` is not in the membership table (the split is from another
            source: rerun ``dvc repro split``).
    """
    roles = membership.set_index("id")["role"]
    ids = np.asarray(ids).astype(str)
    missing = np.setdiff1d(ids, roles.index.to_numpy().astype(str))
    if len(missing):
        raise ValueError(f"{len(missing)} sample ids are not in the split (e.g. {missing[:3].tolist()}): "
                         f"the split is from another source; run dvc repro split")
    return roles.loc[ids].to_numpy() == ROLE_RESERVED
