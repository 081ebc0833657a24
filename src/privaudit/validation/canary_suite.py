"""GX suite ``canaries`` of the canaries stage (raw per-canary statistics of Game 3 and LiDP).

Arrays are recognised by name:

- 0/1 arrays: ``bit``, ``x``, ``y``, ``included``, names starting with ``outcome`` or ending in ``_bit``/``_bits``;
- probabilities: ``proba`` and names starting with ``proba_`` — in [0, 1]; a 2-D ``proba`` must
  have rows summing to 1 (tolerance :data:`PROBA_SUM_TOLERANCE`, the stored values are float32);
- losses: names starting with ``loss`` — finite and >= 0;
- signed statistics: names starting with ``stat`` (random-gradient ⟨c, θ⟩) and ``score`` (the
  black-box canary score) — finite;
- labels: ``true_label``, ``label_pair``, names ending in ``_label`` — integers in [0, C) when C
  is known from ``proba``, else >= 0; ``label_pair`` rows hold two distinct labels, both
  different from ``true_label`` (Malek et al. 2021, App. B, Fig. 4) — with C = 2 classes (the
  label-flip game, :func:`privaudit.canaries.batched_runs.game3_draw`) every row is ``(0, 1)``;
- ``canary_index``: distinct integers >= 0.

Shapes: ``game3`` needs ``bit`` and ``proba`` and every array has one row per canary (N = len(bit)),
``label_pair`` is (N, 2), ``proba`` is (N, C) with C >= 2; ``lidp`` needs ``loss_in``/``loss_null``
(or the signed ``stat_in``/``stat_null``, or the 0/1 outcomes ``x``/``y``), every array 2-D with one row per trial and at least 2 trials
(Pillutla et al. 2023, Algorithm 1); ``blackbox`` needs the signed ``score`` and the 0/1 ``included`` of
every run, 1-D, with at least 2 runs on each side (:mod:`privaudit.canaries.blackbox_trials`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import pandas as pd

from privaudit.validation._frames import FINITE_MAX, as_numeric
from privaudit.validation.core import check_suite

PROBA_SUM_TOLERANCE = 1e-4
REQUIRED = {"game3": (("bit", "proba"),), "lidp": (("loss_in", "loss_null"), ("stat_in", "stat_null"), ("x", "y")),
            "blackbox": (("score", "included"),)}


def _role(key: str) -> str | None:
    if key in ("bit", "x", "y", "included") or key.startswith("outcome") or key.endswith(("_bit", "_bits")):
        return "binary"
    if key == "proba" or key.startswith("proba_"):
        return "probability"
    if key.startswith("loss"):
        return "loss"
    if key.startswith("stat") or key == "score":
        return "statistic"
    if key in ("true_label", "label_pair") or key.endswith("_label"):
        return "label"
    if key == "canary_index":
        return "index"
    return None


def _values_frame(arr: np.ndarray) -> pd.DataFrame:
    """Flattened values; the index is the row (canary or trial) each value belongs to."""
    rows = np.repeat(np.arange(arr.shape[0]), int(np.prod(arr.shape[1:], dtype=np.int64))) if arr.ndim else [0]
    return pd.DataFrame({"value": as_numeric(arr)}, index=pd.Index(rows, name="row"))


def validate_canary_stats(name: Literal["game3", "lidp", "blackbox"], arrays: Mapping[str, np.ndarray]) -> None:
    """Raise :class:`~privaudit.validation.ValidationFailed` unless ``arrays`` are sound canary statistics.

    Args:
        name: ``"game3"`` (``canary_index (N,)``, ``true_label (N,)``, ``label_pair (N, 2)``,
            ``bit (N,)``, ``proba (N, C)``), ``"lidp"`` (``loss_in (n, K)``, ``loss_null (n, m)``,
            or signed ``stat_in (n, K)``, ``stat_null (n, m)``, or 0/1 ``x (n, K)``, ``y (n, m)``) or
            ``"blackbox"`` (signed ``score (n,)``, 0/1 ``included (n,)``, both sides present).
        arrays: array name → array, e.g. the contents of ``game3.npz``.
    """
    import great_expectations.expectations as gxe

    if name not in REQUIRED:
        raise ValueError(f"canary statistics kind must be 'game3', 'lidp' or 'blackbox', got {name!r}")
    arrs = {k: np.asarray(v) for k, v in arrays.items()}
    options = REQUIRED[name]
    need = next((o for o in options if all(k in arrs for k in o)), options[0])
    keys = sorted(set(arrs) | set(need))
    ref_key = need[0]
    n_ref = int(arrs[ref_key].shape[0]) if ref_key in arrs and arrs[ref_key].ndim else -1
    proba = arrs.get("proba")
    n_classes = int(proba.shape[1]) if proba is not None and proba.ndim == 2 else None
    shape = pd.DataFrame({
        "present": [k in arrs for k in keys],
        "ndim": [arrs[k].ndim if k in arrs else -1 for k in keys],
        "rows": [int(arrs[k].shape[0]) if k in arrs and arrs[k].ndim else -1 for k in keys],
        "cols": [int(arrs[k].shape[1]) if k in arrs and arrs[k].ndim >= 2 else -1 for k in keys],
    }, index=pd.Index(keys, name="array"))
    row_what = {"game3": "canary", "lidp": "trial", "blackbox": "run"}[name]
    batches: dict[str, pd.DataFrame] = {"shapes": shape}
    exps: dict[str, list] = {"shapes": [
        gxe.ExpectColumnValuesToBeInSet(column="present", value_set=[True],
                                        description=f"required {name} array present ({' and '.join(need)})"),
        gxe.ExpectColumnValuesToBeBetween(column="rows", min_value=n_ref, max_value=n_ref,
                                          description=f"one row per {row_what} in every array "
                                                      f"({n_ref} as in {ref_key!r})"),
    ]}
    if name == "lidp":
        exps["shapes"] += [
            gxe.ExpectColumnValuesToBeBetween(column="ndim", min_value=2, max_value=2,
                                              description="LiDP arrays are (trials, canaries)"),
            gxe.ExpectColumnValuesToBeBetween(column="rows", min_value=2, description="at least 2 trials"),
            gxe.ExpectColumnValuesToBeBetween(column="cols", min_value=1, description="at least 1 canary per trial"),
        ]
    elif name == "blackbox":
        inc = arrs.get("included")
        sides = (int(np.sum(inc == 1)), int(np.sum(inc == 0))) if inc is not None and inc.ndim == 1 else (0, 0)
        exps["shapes"] += [gxe.ExpectColumnValuesToBeBetween(column="ndim", min_value=1, max_value=1,
                                                             description="black-box arrays are (runs,)")]
        batches["sides"] = pd.DataFrame({"runs": list(sides)}, index=pd.Index(["in", "out"], name="side"))
        exps["sides"] = [gxe.ExpectColumnValuesToBeBetween(column="runs", min_value=2,
                                                           description="at least 2 runs with and 2 without the canary")]
    else:
        lp = arrs.get("label_pair")
        lp_cols = (int(lp.shape[1]) if lp.ndim == 2 else -1) if lp is not None else 2
        batches["columns"] = pd.DataFrame({"label_pair_cols": [lp_cols],
                                           "proba_classes": [n_classes if n_classes is not None else -1]},
                                          index=["game3"])
        exps["columns"] = [
            gxe.ExpectColumnValuesToBeBetween(column="label_pair_cols", min_value=2, max_value=2,
                                              description="label_pair is (N, 2)"),
            gxe.ExpectColumnValuesToBeBetween(column="proba_classes", min_value=2,
                                              description="proba is (N, C) with C >= 2 classes"),
        ]
    for key in keys:
        role = _role(key)
        if key not in arrs or role is None:
            continue
        batch = f"{key}"
        batches[batch] = _values_frame(arrs[key])
        e: list = [gxe.ExpectColumnValuesToNotBeNull(column="value", description=f"{key} values present (no NaN)")]
        if role == "binary":
            e.append(gxe.ExpectColumnValuesToBeInSet(column="value", value_set=[0, 1],
                                                     description=f"{key} outcomes are 0/1"))
        elif role == "probability":
            e.append(gxe.ExpectColumnValuesToBeBetween(column="value", min_value=0.0, max_value=1.0,
                                                       description=f"{key} probabilities in [0, 1]"))
        elif role == "loss":
            e.append(gxe.ExpectColumnValuesToBeBetween(column="value", min_value=0.0, max_value=FINITE_MAX,
                                                       description=f"{key} losses finite and >= 0"))
        elif role == "statistic":
            e.append(gxe.ExpectColumnValuesToBeBetween(column="value", min_value=-FINITE_MAX, max_value=FINITE_MAX,
                                                       description=f"{key} statistics finite"))
        elif role == "label":
            if n_classes is not None:
                e.append(gxe.ExpectColumnValuesToBeInSet(column="value", value_set=list(range(n_classes)),
                                                         description=f"{key} integer labels in [0, {n_classes})"))
            else:
                e.append(gxe.ExpectColumnValuesToBeBetween(column="value", min_value=0,
                                                           description=f"{key} labels >= 0"))
        elif role == "index":
            e += [gxe.ExpectColumnValuesToBeBetween(column="value", min_value=0, description="canary_index >= 0"),
                  gxe.ExpectColumnValuesToBeUnique(column="value", description="canary_index distinct")]
        exps[batch] = e
    if proba is not None and proba.ndim == 2 and proba.shape[0]:
        batches["proba_rows"] = pd.DataFrame({"p_sum": as_numeric(proba.astype(np.float64).sum(axis=1))})
        exps["proba_rows"] = [gxe.ExpectColumnValuesToBeBetween(
            column="p_sum", min_value=1 - PROBA_SUM_TOLERANCE, max_value=1 + PROBA_SUM_TOLERANCE,
            description=f"proba rows sum to 1 (tolerance {PROBA_SUM_TOLERANCE:g})")]
    pair, true = arrs.get("label_pair"), arrs.get("true_label")
    if pair is not None and n_classes == 2 and pair.ndim == 2 and pair.shape[1] == 2:
        # the label-flip game: the pair is both labels, in order (one of them is the true label)
        batches["label_pair_rows"] = pd.DataFrame({"distinct": (pair[:, 0] == 0) & (pair[:, 1] == 1)})
        exps["label_pair_rows"] = [gxe.ExpectColumnValuesToBeInSet(
            column="distinct", value_set=[True],
            description="label_pair is (0, 1) with 2 classes (label-flip game)")]
    elif pair is not None and true is not None and pair.ndim == 2 and pair.shape[1] == 2 and true.shape == pair.shape[:1]:
        batches["label_pair_rows"] = pd.DataFrame({
            "distinct": (pair[:, 0] != pair[:, 1]) & (pair[:, 0] != true) & (pair[:, 1] != true)})
        exps["label_pair_rows"] = [gxe.ExpectColumnValuesToBeInSet(
            column="distinct", value_set=[True],
            description="label_pair holds two distinct wrong labels (both != true_label)")]
    check_suite("canaries", batches, exps, subject=f"{name} canary statistics")
