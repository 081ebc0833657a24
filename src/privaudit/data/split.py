"""Defender/Reserved split (Pedersen et al. 2022, Fig. 1a): seeded and stratified by label."""

from __future__ import annotations

import numpy as np
import pandas as pd
from privaudit.seeding import draw_seed
from sklearn.model_selection import train_test_split

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
    idx = np.arange(n)
    def_idx, _ = train_test_split(
        idx, train_size=n_def, stratify=y, random_state=draw_seed(rng), shuffle=True
    )
    role = np.full(n, ROLE_RESERVED, dtype=object)
    role[def_idx] = ROLE_DEFENDER
    return pd.DataFrame({"id": ids.astype(str), "label": y.astype(np.int64), "role": role.astype(str)})
