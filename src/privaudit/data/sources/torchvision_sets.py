"""``torchvision:<Name>`` data sets (CIFAR10, CIFAR100, MNIST, FashionMNIST, KMNIST, QMNIST).

Files live under ``dataset.path`` (default ``data/external/torchvision``) in torchvision's own
layout. When they are absent, torchvision downloads them where the network allows; set
``PRIVAUDIT_NO_DOWNLOAD=1`` to forbid that. Without network (or with downloads forbidden) the
error says which files to place where. The train and test splits are concatenated into one
pool (the split stage draws Defender/Reserved from it); ids are ``"<name>-train-00042"`` /
``"<name>-test-00042"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.compat import import_torchvision
from privaudit.data.sources.base import DataSourceError, SourceData, subsample_index

DEFAULT_ROOT = Path("data/external/torchvision")
NO_DOWNLOAD_ENV = "PRIVAUDIT_NO_DOWNLOAD"
SUPPORTED: tuple[str, ...] = ("CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "KMNIST", "QMNIST")


def load_torchvision(
    dataset: str, path: str | None, max_samples: int | None = None, rng: np.random.Generator | None = None
) -> SourceData:
    """Both splits of a torchvision data set as ``(n, C, H, W)`` float32 images in [0, 1].

    Args:
        dataset: the class name after ``torchvision:`` (case as in torchvision).
        path: ``dataset.path``, the root folder; ``None`` → :data:`DEFAULT_ROOT`.
        max_samples, rng: optional uniform subsample drawn before pixels are converted.

    Raises:
        DataSourceError: unsupported name; files absent and not downloadable (the message
            lists the files and where to put them).
    """
    if dataset not in SUPPORTED:
        raise DataSourceError(
            f"dataset.name='torchvision:{dataset}' is not supported; use one of {['torchvision:' + s for s in SUPPORTED]}"
        )
    root = DEFAULT_ROOT if path is None or str(path).strip() == "" else Path(path).expanduser()
    torchvision = import_torchvision()
    cls = getattr(torchvision.datasets, dataset)
    parts = [(split, _open(cls, dataset, root, train=(split == "train"))) for split in ("train", "test")]

    images: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    ids: list[str] = []
    for split, ds in parts:
        pixels, targets = _arrays(ds)
        images.append(pixels)
        labels.append(targets)
        ids.extend(f"{dataset.lower()}-{split}-{i:05d}" for i in range(len(targets)))
    pixels_all = np.concatenate(images)
    y = np.concatenate(labels).astype(np.int64)
    id_array = np.array(ids, dtype=np.str_)
    index = subsample_index(len(y), max_samples, rng)
    if index is not None:
        pixels_all, y, id_array = pixels_all[index], y[index], id_array[index]
    X = _to_float_nchw(pixels_all)
    class_names = [str(c) for c in getattr(parts[0][1], "classes", range(int(y.max()) + 1))]
    meta = {
        "name": f"torchvision:{dataset}",
        "n_classes": len(class_names),
        "class_names": class_names,
        "modality": "image",
        "image_shape": list(X.shape[1:]),
        "origin": f"torchvision.datasets.{dataset} (train + test) under {root}",
        "splits": {"train": len(labels[0]), "test": len(labels[1])},
    }
    return SourceData(X=X, y=y, ids=id_array, meta=meta)


def _open(cls: Any, dataset: str, root: Path, train: bool) -> Any:
    """The torchvision data set object, downloading only when allowed and needed."""
    try:
        return cls(root=str(root), train=train, download=False)
    except RuntimeError as exc:
        if "not found" not in str(exc).lower():
            raise DataSourceError(f"dataset.name='torchvision:{dataset}' under {root}: {exc}") from exc
    if os.environ.get(NO_DOWNLOAD_ENV, "").strip() not in ("", "0"):
        raise DataSourceError(
            f"dataset.name='torchvision:{dataset}': files not found under dataset.path={str(root)!r} and "
            f"downloads are off ({NO_DOWNLOAD_ENV} is set). {placement_hint(cls, dataset, root)}"
        )
    try:
        return cls(root=str(root), train=train, download=True)
    except Exception as exc:  # URLError, HTTPError, OSError, checksum RuntimeError, ...
        raise DataSourceError(
            f"dataset.name='torchvision:{dataset}': files not found under dataset.path={str(root)!r} and the "
            f"download failed ({type(exc).__name__}: {exc}). {placement_hint(cls, dataset, root)}"
        ) from exc


def placement_hint(cls: Any, dataset: str, root: Path) -> str:
    """Where to put the files by hand, from the data set class's own URLs and file names."""
    if hasattr(cls, "base_folder") and hasattr(cls, "url"):  # CIFAR10/100
        return (
            f"Download {cls.url} on a machine with network and extract it into {root} "
            f"(giving {root / cls.base_folder}/), e.g. `tar xzf {cls.filename} -C {root}`."
        )
    resources = cls.resources
    if isinstance(resources, dict):  # QMNIST: per subset
        urls = [url for key in ("train", "test") for url, _ in resources[key]]
    else:
        urls = [cls.mirrors[0] + name for name, _ in resources]
    raw = root / dataset / "raw"
    names = [Path(u).name for u in urls]
    return (
        f"Download {', '.join(urls)} and put them in {raw}/ decompressed "
        f"(`gunzip -k` / `xz -dk`, giving {', '.join(Path(n).stem for n in names)}); "
        "with the compressed files there and downloads allowed, torchvision decompresses them itself."
    )


def _arrays(ds: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(pixels uint8 (n, H, W) or (n, H, W, C), labels (n,))`` straight from the data set's arrays."""
    data = ds.data.numpy() if hasattr(ds.data, "numpy") else np.asarray(ds.data)
    targets = ds.targets.numpy() if hasattr(ds.targets, "numpy") else np.asarray(ds.targets)
    if targets.ndim == 2:  # QMNIST: columns (class, writer id, ...); class first
        targets = targets[:, 0]
    return np.asarray(data), np.asarray(targets, dtype=np.int64)


def _to_float_nchw(pixels: np.ndarray) -> np.ndarray:
    """uint8 ``(n, H, W)`` or ``(n, H, W, C)`` → float32 ``(n, C, H, W)`` in [0, 1]."""
    scaled = pixels.astype(np.float32) / np.float32(255.0)
    if scaled.ndim == 3:
        return np.ascontiguousarray(scaled[:, None, :, :])
    return np.ascontiguousarray(np.moveaxis(scaled, -1, 1))
