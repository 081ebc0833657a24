"""Catalogue: bad data files brought by the user (ingest) or damaged between stages (split)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from tests.catalogue.conftest import expect_failure, load_npz, remove, rewrite_npz, table_rows, write_params, write_table

SOURCE = "data/source/source.npz"


def _rows() -> list[list[object]]:
    return table_rows(np.random.default_rng(0))


def test_nan_feature_in_user_table(ws: Path) -> None:
    rows = _rows()
    rows[5][2] = ""  # a missing cell reads as NaN
    write_table(ws / "raw" / "table.csv", rows)
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "missing or infinite feature values", "data row 6", absent=("data/source",))


def test_inf_feature_in_user_table(ws: Path) -> None:
    rows = _rows()
    rows[7][0] = "inf"
    write_table(ws / "raw" / "table.csv", rows)
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "missing or infinite feature values", "data row 8", absent=("data/source",))


def test_empty_user_table(ws: Path) -> None:
    write_table(ws / "raw" / "table.csv", [])
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "dataset.path", "no rows", absent=("data/source",))


def test_truncated_compressed_table(ws: Path) -> None:
    text = (ws / "raw" / "table.csv").read_bytes()
    blob = gzip.compress(text)
    (ws / "raw" / "table.csv.gz").write_bytes(blob[: len(blob) // 2])
    write_params(ws, dataset={"path": "raw/table.csv.gz"})
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "dataset.path", "cannot be parsed", absent=("data/source",))


def test_missing_user_table(ws: Path) -> None:
    write_params(ws, dataset={"path": "raw/nope.csv"})
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "dataset.path='raw/nope.csv' does not exist", absent=("data/source",))


def test_truncated_source_archive(ws: Path) -> None:
    blob = (ws / SOURCE).read_bytes()
    (ws / SOURCE).write_bytes(blob[: len(blob) // 2])
    remove(ws, "data/split")
    expect_failure(ws, "split", "source.npz", "truncated or corrupt", absent=("data/split",))


def test_label_out_of_range(ws: Path) -> None:
    y = load_npz(ws / SOURCE)["y"].copy()
    y[4] = 7
    rewrite_npz(ws / SOURCE, y=y)
    remove(ws, "data/split")
    expect_failure(ws, "split", "labels outside [0, 3)", "max 7", absent=("data/split",))


def test_non_integer_labels(ws: Path) -> None:
    y = load_npz(ws / SOURCE)["y"].astype(np.float64)
    y[0] = 1.5
    rewrite_npz(ws / SOURCE, y=y)
    remove(ws, "data/split")
    expect_failure(ws, "split", "y must be a int64 array, got float64", absent=("data/split",))


def test_duplicate_ids(ws: Path) -> None:
    ids = load_npz(ws / SOURCE)["ids"].copy()
    ids[1] = ids[0]
    rewrite_npz(ws / SOURCE, ids=ids)
    remove(ws, "data/split")
    expect_failure(ws, "split", "ids are not unique", absent=("data/split",))


def test_nan_in_stored_source(ws: Path) -> None:
    X = load_npz(ws / SOURCE)["X"].copy()
    X[3, 1] = np.nan
    rewrite_npz(ws / SOURCE, X=X)
    remove(ws, "data/split")
    expect_failure(ws, "split", "X contains NaN or inf", absent=("data/split",))


def test_empty_stored_source(ws: Path) -> None:
    """Zero rows pass the SourceData constructor; the GX row-count expectation stops them."""
    arrays = load_npz(ws / SOURCE)
    rewrite_npz(ws / SOURCE, X=arrays["X"][:0], y=arrays["y"][:0], ids=arrays["ids"][:0])
    remove(ws, "data/split")
    expect_failure(ws, "split", "validation suite 'source' failed", "at least 2 rows", absent=("data/split",))


def test_class_too_small_for_both_sides(ws: Path) -> None:
    y = load_npz(ws / SOURCE)["y"].copy()
    y[y == 2] = 1
    y[-1] = 2  # class 2 keeps a single sample
    rewrite_npz(ws / SOURCE, y=y)
    remove(ws, "data/split")
    expect_failure(ws, "split", "class 2 has 1 sample", absent=("data/split",))
