"""The csv source on tables the tests write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privaudit.data.sources import load_source


@pytest.fixture
def table(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"f1": rng.normal(size=8), "species": ["b", "a", "c", "a", "b", "c", "a", "b"],
         "f2": rng.integers(0, 5, 8), "flag": [True, False] * 4}
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return path


def test_loads_numeric_features_and_encodes_labels(table: Path) -> None:
    frame = pd.read_csv(table)
    data = load_source("csv", path=str(table), label_column="species")
    assert data.X.shape == (8, 3) and data.X.dtype == np.float32
    assert data.meta["feature_names"] == ["f1", "f2", "flag"]
    np.testing.assert_allclose(data.X[:, 0], frame["f1"].to_numpy(np.float32))
    assert data.meta["class_names"] == ["a", "b", "c"] and data.y.tolist() == [1, 0, 2, 0, 1, 2, 0, 1]
    assert data.meta["label_column"] == "species" and data.ids[7] == "csv-00007"
    assert data.meta["modality"] == "tabular"


def test_tsv_and_numeric_labels(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("y\ta\tb\n10\t1\t2\n9\t3\t4\n10\t5\t6\n", encoding="utf-8")
    data = load_source("csv", path=str(path), label_column="y")
    assert data.meta["class_names"] == ["9", "10"] and data.y.tolist() == [1, 0, 1]
    np.testing.assert_array_equal(data.X, [[1, 2], [3, 4], [5, 6]])


def test_label_column_required_and_must_exist(table: Path) -> None:
    with pytest.raises(ValueError, match=r"dataset\.label_column.*None"):
        load_source("csv", path=str(table))
    with pytest.raises(ValueError, match=r"dataset\.label_column='label' is not a column.*'species'") as err:
        load_source("csv", path=str(table), label_column="label")
    assert "did you mean" not in str(err.value)
    with pytest.raises(ValueError, match=r"'Species' is not a column.* \(did you mean 'species'\? column names are "
                                         r"case-sensitive\)"):
        load_source("csv", path=str(table), label_column="Species")


def test_non_numeric_columns_named(table: Path) -> None:
    with pytest.raises(ValueError, match=r"columns \['species'\] are not numeric"):
        load_source("csv", path=str(table), label_column="f2")


def test_missing_values_named(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("y,a,b\n0,1,2\n1,,4\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing or infinite.*data row 2, columns \['a'\]"):
        load_source("csv", path=str(path), label_column="y")


def test_empty_and_folder(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("y,a\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no rows"):
        load_source("csv", path=str(tmp_path / "e.csv"), label_column="y")
    with pytest.raises(ValueError, match="is a folder"):
        load_source("csv", path=str(tmp_path), label_column="y")


def test_subsample(table: Path) -> None:
    data = load_source("csv", path=str(table), label_column="species", max_samples=3, rng=np.random.default_rng(5))
    assert data.n == 3 and all(i.startswith("csv-") for i in data.ids)


def test_missing_labels_name_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("label,a\n1,0.5\n,0.1\n0,0.2\n,0.3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing label values in 2 row\(s\) \(data rows 1, 3, counted from 0 after "
                                         r"the header\): fill them in or drop those rows"):
        load_source("csv", path=str(path), label_column="label")
