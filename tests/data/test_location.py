"""The Location source: the real benchmark when present, and small archives the tests write."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from privaudit.data.sources import load_source


def _write_tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return path


def _rows(labels: list[int], n_features: int, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    X = rng.integers(0, 2, size=(len(labels), n_features))
    lines = [f'"{lab}",' + ",".join(map(str, row)) for lab, row in zip(labels, X)]
    return ("\n".join(lines) + "\n").encode(), X


def test_real_location_benchmark(location_tgz: Path) -> None:
    data = load_source("location", path=str(location_tgz))
    assert data.X.shape == (5010, 446) and data.X.dtype == np.float32
    assert set(np.unique(data.X).tolist()) == {0.0, 1.0}
    assert data.meta["n_classes"] == 30 and set(np.unique(data.y)) == set(range(30))
    assert data.meta["class_names"] == [str(c) for c in range(1, 31)]
    assert data.meta["label_mapping"]["13"] == 12 and data.y[0] == 12  # first row's label is "13"
    assert data.meta["modality"] == "tabular" and data.meta["image_shape"] is None
    assert data.ids[0] == "location-00000" and data.ids[-1] == "location-05009"


def test_synthetic_archive_labels_remapped_numerically(tmp_path: Path) -> None:
    labels = [10, 2, 2, 7, 10, 7, 2]
    payload, X = _rows(labels, 5, np.random.default_rng(1))
    tgz = _write_tgz(tmp_path / "loc.tgz", {"data/bangkok": payload, "data/._bangkok": b"junk"})
    data = load_source("location", path=str(tgz))
    assert data.meta["class_names"] == ["2", "7", "10"]  # numeric, not string, order
    assert data.y.tolist() == [2, 0, 0, 1, 2, 1, 0]
    assert data.meta["label_mapping"] == {"2": 0, "7": 1, "10": 2}
    np.testing.assert_array_equal(data.X, X.astype(np.float32))
    assert data.meta["origin"] == "loc.tgz:data/bangkok"


def test_plain_csv_file_works_too(tmp_path: Path) -> None:
    payload, _ = _rows([1, 2, 1], 4, np.random.default_rng(2))
    (tmp_path / "bangkok").write_bytes(payload)
    data = load_source("location", path=str(tmp_path / "bangkok"))
    assert data.X.shape == (3, 4) and data.y.tolist() == [0, 1, 0]


def test_truncated_archive_is_a_clear_error(tmp_path: Path) -> None:
    payload, _ = _rows(list(range(1, 31)) * 20, 300, np.random.default_rng(3))
    tgz = _write_tgz(tmp_path / "loc.tgz", {"bangkok": payload})
    tgz.write_bytes(tgz.read_bytes()[: tgz.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"dataset\.path=.*loc\.tgz.*truncated or corrupt"):
        load_source("location", path=str(tgz))


def test_several_files_in_archive(tmp_path: Path) -> None:
    payload, _ = _rows([1, 2], 3, np.random.default_rng(4))
    tgz = _write_tgz(tmp_path / "loc.tgz", {"a": payload, "b": payload})
    with pytest.raises(ValueError, match=r"exactly one data file.*\['a', 'b'\]"):
        load_source("location", path=str(tgz))


@pytest.mark.parametrize(
    "text, match",
    [
        (b'"1",0,1\n"2",0,x\n', "non-numeric"),
        (b'"1",0,1\n"2",0,\n', "missing or non-numeric"),
        (b'"1",0,1\n"2",0,1,1\n', "constant number of columns"),
        (b'"1",0,1\n,0,1\n', "missing label"),
    ],
)
def test_bad_rows(tmp_path: Path, text: bytes, match: str) -> None:
    tgz = _write_tgz(tmp_path / "loc.tgz", {"bangkok": text})
    with pytest.raises(ValueError, match=match):
        load_source("location", path=str(tgz))
