"""Any table as a data source: ``dataset.path`` (CSV/TSV with a header) and ``dataset.label_column``.

Every column except the label must be numeric (ints, floats or booleans) with no missing
values; text columns are refused with their names so the user can drop or encode them.
Labels may be any values; they are mapped to ``0..C-1`` (numeric order when they are numbers)
and the mapping is kept in ``meta["label_mapping"]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.data.sources.base import DataSourceError, SourceData, encode_labels, make_ids
from privaudit.messages import MAX_VALUE_CHARS, cap

#: separators a one-column header gives away (privaudit reads ',' and, for *.tsv/*.tab, tab only)
_OTHER_SEPARATORS = (";", "\t", "|")


def _other_separator(columns: list[str], sep: str) -> str | None:
    """The separator a header parsed as ONE column seems to use instead of ``sep`` (``None``: no sign of one)."""
    if len(columns) != 1:
        return None
    return next((s for s in _OTHER_SEPARATORS if s != sep and s in columns[0]), None)


def _separator_message(path: Path, header: str, other: str) -> str:
    """One line: which separator the file seems to use, what privaudit reads, and how to convert it."""
    shown = "tab" if other == "\t" else repr(other)
    if other == "\t":
        fix = "name it *.tsv (tab-separated files are read by that name) or re-save it with ',' between columns"
    else:
        fix = (f"re-save it with ',' between columns, e.g. pandas.read_csv(path, sep={other!r}).to_csv(new_path, "
               "index=False) (add decimal=',' when its numbers use decimal commas)")
    return (f"dataset.path={str(path)!r} looks {shown}-separated: its header parses as one column "
            f"{cap(repr(header), MAX_VALUE_CHARS)}; privaudit reads comma-separated files (tab-separated when "
            f"the name ends in .tsv or .tab): {fix}")


def load_csv(path: Path, label_column: str | None) -> SourceData:
    """Read a headed table; ``.tsv``/``.tab`` files are tab-separated, others comma-separated.

    Args:
        path: the file (``dataset.path``); ``.gz``/``.bz2``/``.zip``/``.xz`` compression is inferred.
        label_column: name of the label column (``dataset.label_column``).

    Returns:
        :class:`SourceData` with ``X`` ``(n, d)`` float32 (d = number of feature columns,
        in file order, listed in ``meta["feature_names"]``), ``y`` ``(n,)`` int64,
        ids ``"csv-00000"`` … in row order.

    Raises:
        DataSourceError: missing label column, non-numeric or missing feature values,
            unreadable file; the message names the params key and the bad value.
    """
    path = Path(path)
    if label_column is None or str(label_column).strip() == "":
        raise DataSourceError(
            f"dataset.name='csv' needs dataset.label_column (the column holding the labels), got {label_column!r}"
        )
    if path.is_dir():
        raise DataSourceError(f"dataset.path={str(path)!r} is a folder; dataset.name='csv' needs a table file")
    stem = path.name.lower().removesuffix(".gz").removesuffix(".bz2").removesuffix(".xz").removesuffix(".zip")
    sep = "\t" if stem.endswith((".tsv", ".tab")) else ","
    try:
        frame = pd.read_csv(path, sep=sep)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError) as exc:
        raise DataSourceError(f"dataset.path={str(path)!r} cannot be parsed as a table: {exc}") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    other = _other_separator(list(frame.columns), sep)
    if other is not None:
        raise DataSourceError(_separator_message(path, frame.columns[0], other))
    if label_column not in frame.columns:
        columns = cap(repr(list(frame.columns)), 300)
        near = [c for c in frame.columns if c.strip().lower() == str(label_column).strip().lower()]
        hint = f" (did you mean {near[0]!r}? column names are case-sensitive)" if near else ""
        raise DataSourceError(
            f"dataset.label_column={label_column!r} is not a column of dataset.path={str(path)!r}{hint}: set it to "
            f"the label column's name; columns are {columns}"
        )
    if len(frame) == 0:
        raise DataSourceError(f"dataset.path={str(path)!r} has a header but no rows")
    features = frame.drop(columns=[label_column])
    if features.shape[1] == 0:
        raise DataSourceError(f"dataset.path={str(path)!r} has no feature columns besides {label_column!r}")
    text_columns = [
        c for c, t in features.dtypes.items()
        if not (pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t))
    ]
    if text_columns:
        raise DataSourceError(
            f"dataset.path={str(path)!r}: columns {text_columns[:10]} are not numeric; dataset.name='csv' takes "
            "numeric features only (drop or encode them, or set dataset.label_column if one is the label)"
        )
    X = features.to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if bad.size:
        columns = [str(c) for c in features.columns[~np.isfinite(X[bad[0]])]]
        raise DataSourceError(
            f"dataset.path={str(path)!r}: {bad.size} rows have missing or infinite feature values "
            f"(first: data row {int(bad[0]) + 1}, columns {columns[:10]})"
        )
    y, class_names, mapping = encode_labels(
        frame[label_column].to_numpy(), f"dataset.label_column={label_column!r} in dataset.path={str(path)!r}"
    )
    meta = {
        "name": "csv",
        "n_classes": len(class_names),
        "class_names": class_names,
        "modality": "tabular",
        "image_shape": None,
        "origin": path.name,
        "label_column": label_column,
        "label_mapping": mapping,
        "feature_names": [str(c) for c in features.columns],
    }
    return SourceData(X=X.astype(np.float32), y=y, ids=make_ids("csv", len(y)), meta=meta)
