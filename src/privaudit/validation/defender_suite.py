"""GX suite ``defender_outputs`` of the defenders stage (and of every stage reading them).

Checks (docs/architecture.md, "Validation before work" table, row *defenders*) on the per-sample
outputs table (id, role, label, loss, correct, p_0..p_{C-1}): the columns exist; exactly one row
per expected sample (row count, unique ids, every id expected); every p_c in [0, 1] and
non-null; each row's probabilities sum to 1 within ``SUM_TOLERANCE``; loss finite and >= 0; role
is defender/reserved.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.validation._frames import FINITE_MAX, as_numeric, ids_column
from privaudit.validation.core import check_suite

SUM_TOLERANCE = 1e-6
ROLES = ("defender", "reserved")


def validate_defender_outputs(outputs: pd.DataFrame, n_classes: int, expected_ids: np.ndarray) -> None:
    """Raise :class:`~privaudit.validation.ValidationFailed` unless ``outputs`` is a sound outputs table.

    Args:
        outputs: ``(n, 5 + C)`` table with columns ``id, role, label, loss, correct, p_0..p_{C-1}``.
        n_classes: C.
        expected_ids: ``(n,)`` ids of every sample the defender must have scored.
    """
    import great_expectations.expectations as gxe

    prob_cols = [f"p_{c}" for c in range(n_classes)]
    required = ["id", "loss", *prob_cols]
    present = [c for c in required if c in outputs.columns]
    expected = [str(i) for i in np.asarray(expected_ids).ravel()]
    columns = pd.DataFrame({"column": required, "present": [c in outputs.columns for c in required]}, index=required)
    frame = pd.DataFrame(index=pd.RangeIndex(len(outputs)))
    col_exps = [gxe.ExpectColumnValuesToBeInSet(column="present", value_set=[True],
                                                description="required output column exists")]
    row_exps = [gxe.ExpectTableRowCountToEqual(value=len(expected),
                                               description=f"one row per sample ({len(expected)} samples)")]
    if "id" in present:
        frame["id"] = ids_column(outputs["id"].to_numpy()).to_numpy()
        # membership in the scored ids as a column: GX copied a value_set of every id about 75 times per
        # validation (pydantic v1), 1.3 s a call at 10k rows and 5.6 s at 50k against 0.24 and 0.76 s now
        # (``benchmarks/results/validation_defender_ids_cpu.txt``); a null id is the non-null check's finding, as
        # GX's own set check skips nulls
        frame["id_scored"] = frame["id"].isna() | frame["id"].isin(set(expected))
        row_exps += [
            gxe.ExpectColumnValuesToNotBeNull(column="id", description="ids are non-null"),
            gxe.ExpectColumnValuesToBeUnique(column="id", description="one row per sample (duplicate ids)"),
            gxe.ExpectColumnValuesToBeInSet(column="id_scored", value_set=[True],
                                            description="ids are those of the scored samples"),
        ]
    if "loss" in present:
        frame["loss"] = as_numeric(outputs["loss"].to_numpy())
        row_exps += [
            gxe.ExpectColumnValuesToNotBeNull(column="loss", description="loss is present (not NaN)"),
            gxe.ExpectColumnValuesToBeBetween(column="loss", min_value=0.0, max_value=FINITE_MAX,
                                              description="loss is finite and >= 0"),
        ]
    if "role" in outputs.columns:
        frame["role"] = outputs["role"].to_numpy()
        row_exps.append(gxe.ExpectColumnValuesToBeInSet(column="role", value_set=list(ROLES),
                                                        description="role is defender or reserved"))
    if set(prob_cols) <= set(outputs.columns) and n_classes > 0:
        P = np.column_stack([as_numeric(outputs[c].to_numpy()) for c in prob_cols])
        frame["p_min"], frame["p_max"], frame["p_sum"] = P.min(axis=1), P.max(axis=1), P.sum(axis=1)
        row_exps += [
            gxe.ExpectColumnValuesToNotBeNull(column="p_sum", description="probabilities are present (no NaN)"),
            gxe.ExpectColumnValuesToBeBetween(column="p_min", min_value=0.0,
                                              description="probabilities p_* are >= 0"),
            gxe.ExpectColumnValuesToBeBetween(column="p_max", max_value=1.0,
                                              description="probabilities p_* are <= 1"),
            gxe.ExpectColumnValuesToBeBetween(
                column="p_sum", min_value=1.0 - SUM_TOLERANCE, max_value=1.0 + SUM_TOLERANCE,
                description=f"probabilities of a row sum to 1 (tolerance {SUM_TOLERANCE:g})"),
        ]
    if "id" in frame.columns:
        frame.index = pd.Index(frame["id"].fillna("<null>").to_numpy(), name="id")
    check_suite("defender_outputs", {"columns": columns, "rows": frame},
                {"columns": col_exps, "rows": row_exps}, subject=f"{len(outputs)} outputs, {n_classes} classes")
