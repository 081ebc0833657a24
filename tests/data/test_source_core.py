"""SourceData contract, the embedded sets (digits, mnist5k), subsampling and the source.npz/meta.json round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privaudit.data.sources import DataSourceError, SourceData, load_source, read_source, save_source


def _tiny(n: int = 6) -> SourceData:
    return SourceData(
        X=np.arange(n * 3, dtype=np.float32).reshape(n, 3),
        y=np.arange(n, dtype=np.int64) % 2,
        ids=np.array([f"t-{i}" for i in range(n)]),
        meta={"name": "t", "n_classes": 2, "class_names": ["a", "b"], "modality": "tabular",
              "image_shape": None, "origin": "test"},
    )


def test_digits_shapes_labels_ids() -> None:
    data = load_source("digits")
    assert data.X.shape == (1797, 1, 8, 8) and data.X.dtype == np.float32
    assert data.X.min() == 0.0 and data.X.max() == 1.0
    assert data.y.dtype == np.int64 and set(np.unique(data.y)) == set(range(10))
    assert data.ids[0] == "digits-00000" and data.ids[42] == "digits-00042"
    assert data.ids.dtype.kind == "U" and len(set(data.ids.tolist())) == 1797
    assert data.meta["modality"] == "image" and data.meta["image_shape"] == [1, 8, 8]
    assert data.meta["n_classes"] == 10 and data.meta["class_names"][3] == "3"
    json.dumps(data.meta)


def test_subsample_uses_rng_and_keeps_ids() -> None:
    full = load_source("digits")
    a = load_source("digits", max_samples=100, rng=np.random.default_rng(7))
    b = load_source("digits", max_samples=100, rng=np.random.default_rng(7))
    c = load_source("digits", max_samples=100, rng=np.random.default_rng(8))
    assert a.n == 100 and np.array_equal(a.ids, b.ids) and not np.array_equal(a.ids, c.ids)
    pos = np.searchsorted(full.ids, a.ids)
    assert np.array_equal(full.ids[pos], a.ids)
    assert np.array_equal(full.X[pos], a.X) and np.array_equal(full.y[pos], a.y)


def test_subsample_without_rng_is_an_error() -> None:
    with pytest.raises(ValueError, match="dataset.max_samples=10"):
        load_source("digits", max_samples=10)
    assert load_source("digits", max_samples=5000).n == 1797  # larger than the set: all of it


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_bad_max_samples(bad: object) -> None:
    with pytest.raises(ValueError, match="dataset.max_samples"):
        load_source("digits", max_samples=bad, rng=np.random.default_rng(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["digitz", "", "torch:CIFAR10", "CSV"])
def test_unknown_name_names_the_value(name: str) -> None:
    assert issubclass(DataSourceError, ValueError)
    with pytest.raises(DataSourceError, match=r"dataset\.name") as info:
        load_source(name)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["location", "csv", "imagefolder"])
def test_missing_path(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs dataset\.path"):
        load_source(name, path=None, label_column="y")
    with pytest.raises(ValueError, match=r"dataset\.path=.*does not exist"):
        load_source(name, path=str(tmp_path / "nope"), label_column="y")


def test_round_trip(tmp_path: Path) -> None:
    data = load_source("digits", max_samples=50, rng=np.random.default_rng(0))
    save_source(data, tmp_path / "src")
    back = read_source(tmp_path / "src")
    assert np.array_equal(back.X, data.X) and back.X.dtype == np.float32
    assert np.array_equal(back.y, data.y) and back.y.dtype == np.int64
    assert np.array_equal(back.ids, data.ids) and back.ids.dtype.kind == "U"
    assert back.meta == data.meta
    with np.load(tmp_path / "src" / "source.npz", allow_pickle=False) as z:  # no object arrays
        assert {k: z[k].dtype.kind for k in z.files} == {"X": "f", "y": "i", "ids": "U"}


def test_read_truncated_npz_names_the_file(tmp_path: Path) -> None:
    save_source(_tiny(), tmp_path)
    npz = tmp_path / "source.npz"
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    with pytest.raises(ValueError, match="source.npz") as info:
        read_source(tmp_path)
    assert "truncated or corrupt" in str(info.value)


def test_read_corrupt_meta_and_missing_files(tmp_path: Path) -> None:
    save_source(_tiny(), tmp_path)
    (tmp_path / "meta.json").write_text('{"name": "t", ', encoding="utf-8")
    with pytest.raises(ValueError, match="meta.json"):
        read_source(tmp_path)
    with pytest.raises(ValueError, match="source.npz is missing"):
        read_source(tmp_path / "empty")


def test_object_arrays_are_refused(tmp_path: Path) -> None:
    save_source(_tiny(), tmp_path)
    np.savez(tmp_path / "source.npz", X=np.array([object()] * 6), y=np.zeros(6), ids=np.zeros(6))
    with pytest.raises(ValueError, match="source.npz"):
        read_source(tmp_path)


def test_sourcedata_validates() -> None:
    good = _tiny()
    with pytest.raises(ValueError, match="labels outside"):
        SourceData(X=good.X, y=good.y + 5, ids=good.ids, meta=good.meta)
    with pytest.raises(ValueError, match="ids are not unique"):
        SourceData(X=good.X, y=good.y, ids=np.array(["a"] * 6), meta=good.meta)
    with pytest.raises(ValueError, match="float32"):
        SourceData(X=good.X.astype(np.float64), y=good.y, ids=good.ids, meta=good.meta)
    with pytest.raises(ValueError, match="JSON"):
        SourceData(X=good.X, y=good.y, ids=good.ids, meta={**good.meta, "origin": object()})
    bad_x = good.X.copy()
    bad_x[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        SourceData(X=bad_x, y=good.y, ids=good.ids, meta=good.meta)
    image_meta = {**good.meta, "modality": "image", "image_shape": [1, 1, 3]}
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        SourceData(X=good.X.reshape(6, 1, 1, 3), y=good.y, ids=good.ids, meta=image_meta)


def test_read_source_names_the_folder_when_contents_are_invalid(tmp_path: Path) -> None:
    save_source(_tiny(), tmp_path)
    np.savez(tmp_path / "source.npz", X=np.zeros((6, 3), np.float32), y=np.arange(6), ids=np.array(list("abcdef")))
    with pytest.raises(ValueError, match=r"do not form a valid source.*labels outside"):
        read_source(tmp_path)


def test_mnist5k() -> None:
    data = load_source("mnist5k")
    assert data.X.shape == (5000, 1, 28, 28) and data.X.dtype == np.float32
    assert 0.0 == data.X.min() and data.X.max() == 1.0
    assert np.bincount(data.y).tolist() == [500] * 10
    assert data.meta["image_shape"] == [1, 28, 28] and data.ids[4999] == "mnist5k-04999"
    # a stroke image: mostly background, some ink
    ink = (data.X > 0.5).mean()
    assert 0.05 < ink < 0.3
