"""torchvision:<Name> sources: loading from files laid out like torchvision's, and offline errors."""

from __future__ import annotations

import struct
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from privaudit.compat import import_torchvision
from privaudit.data.sources import load_source
from privaudit.data.sources.torchvision_sets import NO_DOWNLOAD_ENV


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX ('SN3 pascalvincent') file: magic (0, 0, type, ndim), big-endian dims, big-endian data."""
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C}[array.dtype]
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}i", *array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + array.astype(array.dtype.newbyteorder(">")).tobytes())


def _fake_fashion(root: Path) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    raw = root / "FashionMNIST" / "raw"
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.uint8)
    _write_idx(raw / "train-images-idx3-ubyte", images[:5])
    _write_idx(raw / "train-labels-idx1-ubyte", labels[:5])
    _write_idx(raw / "t10k-images-idx3-ubyte", images[5:])
    _write_idx(raw / "t10k-labels-idx1-ubyte", labels[5:])
    return images, labels


def test_fashionmnist_from_local_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_DOWNLOAD_ENV, "1")
    images, labels = _fake_fashion(tmp_path)
    data = load_source("torchvision:FashionMNIST", path=str(tmp_path))
    assert data.X.shape == (7, 1, 28, 28) and data.X.dtype == np.float32
    np.testing.assert_allclose(data.X[:, 0] * 255, images, atol=1e-3)
    assert data.y.tolist() == labels.tolist()
    assert data.ids.tolist()[4:6] == ["fashionmnist-train-00004", "fashionmnist-test-00000"]
    assert data.meta["n_classes"] == 10 and data.meta["class_names"][0] == "T-shirt/top"
    assert data.meta["splits"] == {"train": 5, "test": 2}
    sub = load_source("torchvision:FashionMNIST", path=str(tmp_path), max_samples=3, rng=np.random.default_rng(1))
    assert sub.n == 3 and set(sub.ids) <= set(data.ids)


def test_qmnist_labels_are_the_class_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_DOWNLOAD_ENV, "1")
    raw = tmp_path / "QMNIST" / "raw"
    for split, n in (("train", 3), ("test", 2)):
        _write_idx(raw / f"qmnist-{split}-images-idx3-ubyte", np.zeros((n, 28, 28), dtype=np.uint8))
        extra = np.full((n, 8), 777, dtype=np.int32)
        extra[:, 0] = np.arange(n) + 2
        _write_idx(raw / f"qmnist-{split}-labels-idx2-int", extra)
    data = load_source("torchvision:QMNIST", path=str(tmp_path))
    assert data.y.tolist() == [2, 3, 4, 2, 3]


def test_offline_error_says_where_to_put_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_DOWNLOAD_ENV, "1")
    with pytest.raises(ValueError) as info:
        load_source("torchvision:CIFAR10", path=str(tmp_path))
    message = str(info.value)
    assert "torchvision:CIFAR10" in message and "cifar-10-python.tar.gz" in message
    assert str(tmp_path / "cifar-10-batches-py") in message
    with pytest.raises(ValueError, match=r"MNIST/raw/ .*train-images-idx3-ubyte"):
        load_source("torchvision:MNIST", path=str(tmp_path))


def test_failed_download_is_wrapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_DOWNLOAD_ENV, raising=False)
    torchvision = import_torchvision()

    def no_network(self: object) -> None:
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(torchvision.datasets.CIFAR10, "download", no_network)
    with pytest.raises(ValueError, match=r"download failed \(URLError.*extract it into"):
        load_source("torchvision:CIFAR10", path=str(tmp_path))


def test_unsupported_name() -> None:
    with pytest.raises(ValueError, match=r"dataset\.name='torchvision:ImageNet' is not supported"):
        load_source("torchvision:ImageNet")
