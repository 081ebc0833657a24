"""GX suite ``source`` of the ingest stage (and of every stage reading ``data/source/``).

Checks (docs/architecture.md, "Validation before work" table, row *ingest*): at least
``min_rows`` rows; X, y and ids of equal length; ids non-null and unique; labels non-null,
integer and in ``[0, n_classes)``; features finite (no NaN/inf).
:class:`~privaudit.data.sources.SourceData` checks some of this on construction; the suite is
the stage-level guard that also covers whatever a user's file or a future source brings, and
records the result in the Data Docs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.data.sources import SourceData
from privaudit.validation._frames import as_numeric, ids_column, nonfinite_per_row
from privaudit.validation.core import check_suite


def validate_source(data: SourceData, min_rows: int = 2) -> None:
    """Raise :class:`~privaudit.validation.ValidationFailed` unless ``data`` is a sound data set.

    Args:
        data: ``X`` ``(n, d)`` or ``(n, C, H, W)``, ``y`` ``(n,)``, ``ids`` ``(n,)``, ``meta["n_classes"]``.
        min_rows: smallest acceptable number of samples.
    """
    import great_expectations.expectations as gxe

    X, y, ids = np.asarray(data.X), np.asarray(data.y), np.asarray(data.ids)
    n_classes = int(data.meta.get("n_classes", 0) or 0)
    n_x = int(X.shape[0]) if X.ndim else 1
    n = max(n_x, int(y.size), int(ids.size))
    labels = as_numeric(y)
    bad = nonfinite_per_row(X)
    rows = pd.DataFrame({
        "id": ids_column(ids, n),
        "label": np.concatenate([labels, np.full(n - labels.size, np.nan)]),
        "nonfinite_features": np.concatenate([bad, np.zeros(n - bad.size, dtype=np.int64)]),
    })
    shape = pd.DataFrame({"rows_X": [n_x], "rows_y": [int(y.size)], "rows_ids": [int(ids.size)],
                          "n_classes": [n_classes]}, index=["source"])
    classes = list(range(n_classes))
    expectations = {
        "shape": [
            gxe.ExpectColumnPairValuesToBeEqual(column_A="rows_X", column_B="rows_y",
                                                description="X and y have the same number of rows"),
            gxe.ExpectColumnPairValuesToBeEqual(column_A="rows_X", column_B="rows_ids",
                                                description="X and ids have the same number of rows"),
            gxe.ExpectColumnValuesToBeBetween(column="n_classes", min_value=2,
                                              description="meta n_classes is at least 2"),
        ],
        "rows": [
            gxe.ExpectTableRowCountToBeBetween(min_value=min_rows,
                                               description=f"data set has at least {min_rows} rows (not empty)"),
            gxe.ExpectColumnValuesToNotBeNull(column="id", description="ids are non-null"),
            gxe.ExpectColumnValuesToBeUnique(column="id", description="ids are unique (duplicate ids)"),
            gxe.ExpectColumnValuesToNotBeNull(column="label", description="labels are present and numeric"),
            gxe.ExpectColumnValuesToBeInSet(column="label", value_set=classes,
                                            description=f"labels are integers in [0, {n_classes})"),
            gxe.ExpectColumnValuesToBeBetween(column="nonfinite_features", min_value=0, max_value=0,
                                              description="features are finite (count of NaN/inf per row is 0)"),
        ],
    }
    check_suite("source", {"shape": shape, "rows": rows}, expectations,
                subject=f"data set {data.meta.get('name', '?')!r}")
