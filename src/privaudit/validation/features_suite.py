"""GX suite ``features`` of the featurize stage (and of every stage reading ``data/features/``).

Checks (docs/architecture.md, "Validation before work" table, row *featurize*): X is 2-D
``(n, d)``; ``d`` equals the expected dimension when one is known (the backbone's, or
``meta.json``'s ``dim``); one id per row; the ids equal the source ids, same set in the same
order; features finite.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.validation._frames import ids_column, nonfinite_per_row
from privaudit.validation.core import check_suite


def validate_features(
    X: np.ndarray, ids: np.ndarray, source_ids: np.ndarray, expected_dim: int | None = None
) -> None:
    """Raise :class:`~privaudit.validation.ValidationFailed` unless ``X`` are sound embeddings.

    Args:
        X: ``(n, d)`` embeddings.
        ids: ``(n,)`` ids of the rows of ``X``.
        source_ids: ``(n,)`` ids of the source data set, in source order.
        expected_dim: ``d`` expected, or ``None`` to skip the dimension check.
    """
    import great_expectations.expectations as gxe

    X = np.asarray(X)
    ids, source_ids = np.asarray(ids).ravel(), np.asarray(source_ids).ravel()
    n_x = int(X.shape[0]) if X.ndim else 0
    dim = int(X.shape[1]) if X.ndim == 2 else -1
    n = max(n_x, ids.size, source_ids.size)
    bad = nonfinite_per_row(X) if X.ndim else np.zeros(0, dtype=np.int64)
    rows = pd.DataFrame({
        "id": ids_column(ids, n),
        "source_id": ids_column(source_ids, n),
        "nonfinite_features": np.concatenate([bad, np.zeros(n - bad.size, dtype=np.int64)]),
    })
    shape = pd.DataFrame({"ndim": [int(X.ndim)], "dim": [dim], "rows_X": [n_x], "rows_ids": [int(ids.size)],
                          "rows_source": [int(source_ids.size)]}, index=["features"])
    shape_exps = [
        gxe.ExpectColumnValuesToBeBetween(column="ndim", min_value=2, max_value=2,
                                          description="features are a 2-D (n, d) array"),
        gxe.ExpectColumnPairValuesToBeEqual(column_A="rows_X", column_B="rows_ids",
                                            description="one id per feature row"),
        gxe.ExpectColumnPairValuesToBeEqual(column_A="rows_ids", column_B="rows_source",
                                            description="as many feature rows as source samples"),
    ]
    if expected_dim is not None:
        shape_exps.append(gxe.ExpectColumnValuesToBeBetween(
            column="dim", min_value=int(expected_dim), max_value=int(expected_dim),
            description=f"feature dimension is {int(expected_dim)}"))
    expectations = {
        "shape": shape_exps,
        "rows": [
            gxe.ExpectColumnValuesToNotBeNull(column="id", description="feature ids are non-null"),
            gxe.ExpectColumnValuesToBeUnique(column="id", description="feature ids are unique"),
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="id", column_B="source_id", ignore_row_if="both_values_are_missing",
                description="feature ids aligned with the source ids (same set, same order)"),
            gxe.ExpectColumnValuesToBeBetween(column="nonfinite_features", min_value=0, max_value=0,
                                              description="features are finite (count of NaN/inf per row is 0)"),
        ],
    }
    check_suite("features", {"shape": shape, "rows": rows}, expectations, subject=f"features {n_x}x{dim}")
