"""The Location benchmark (Foursquare check-ins; Shokri et al. 2017) from its ``.tgz``.

The archive holds one headerless CSV (``bangkok``): the label first (quoted, ``"1"``..``"30"``),
then 446 binary features. Labels are remapped to ``0..C-1`` in numeric order and the mapping
is kept in ``meta["label_mapping"]`` (original label → class index).
"""

from __future__ import annotations

import io
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.data.sources.base import DataSourceError, SourceData, encode_labels, make_ids

ARCHIVE_SUFFIXES: tuple[str, ...] = (".tgz", ".tar.gz", ".tar", ".tar.bz2", ".tar.xz")


def load_location(path: Path) -> SourceData:
    """Read the Location data from ``path`` (the ``.tgz`` or the extracted CSV file).

    Returns:
        :class:`SourceData` with ``X`` ``(n, d)`` float32 (d = 446 for the benchmark),
        ``y`` ``(n,)`` in ``0..C-1``, ids ``"location-00000"`` … in file row order.

    Raises:
        DataSourceError: unreadable or truncated archive, no or several data files inside,
            ragged rows, non-numeric or missing feature values; names ``dataset.path``.
    """
    path = Path(path)
    if path.is_dir():
        raise DataSourceError(f"dataset.path={str(path)!r} is a folder; dataset.name='location' needs the .tgz file")
    if _is_archive(path):
        member_name, raw = _read_single_member(path)
        origin = f"{path.name}:{member_name}"
    else:
        raw, origin = path.read_bytes(), path.name
    return _parse(raw, where=f"dataset.path={str(path)!r} ({origin})", origin=origin)


def _is_archive(path: Path) -> bool:
    name = path.name.lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return True
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def _read_single_member(path: Path) -> tuple[str, bytes]:
    """The bytes of the one data file in the archive (hidden/AppleDouble files ignored)."""
    try:
        with tarfile.open(path, mode="r:*") as archive:
            members = [
                m for m in archive.getmembers()
                if m.isfile() and not Path(m.name).name.startswith((".", "._")) and m.size > 0
            ]
            if len(members) != 1:
                names = [m.name for m in members]
                raise DataSourceError(
                    f"dataset.path={str(path)!r}: expected exactly one data file in the archive, found {names}"
                )
            handle = archive.extractfile(members[0])
            if handle is None:
                raise DataSourceError(f"dataset.path={str(path)!r}: cannot read {members[0].name!r}")
            return members[0].name, handle.read()
    except DataSourceError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DataSourceError(
            f"dataset.path={str(path)!r} is not a readable tar archive (truncated or corrupt?): {exc}"
        ) from exc


def _parse(raw: bytes, where: str, origin: str) -> SourceData:
    """Parse headerless CSV bytes: label first, numeric features after."""
    try:
        frame = pd.read_csv(io.BytesIO(raw), header=None, dtype={0: str}, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataSourceError(f"{where}: not a CSV with a constant number of columns: {exc}") from exc
    if frame.shape[1] < 2 or frame.shape[0] < 1:
        raise DataSourceError(f"{where}: expected rows of 'label,feature,...', got shape {frame.shape}")
    body = frame.iloc[:, 1:]
    if all(pd.api.types.is_numeric_dtype(t) for t in body.dtypes):
        features = body.to_numpy(dtype=np.float64)
    else:
        features = body.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    bad_rows = np.flatnonzero(~np.isfinite(features).all(axis=1))
    if bad_rows.size:
        row = int(bad_rows[0])
        raise DataSourceError(
            f"{where}: {bad_rows.size} rows have missing or non-numeric features (first: line {row + 1}, "
            f"{frame.iloc[row, 1:].tolist()[:8]}...)"
        )
    y, class_names, mapping = encode_labels(frame.iloc[:, 0].to_numpy(), where)
    X = features.astype(np.float32)
    meta = {
        "name": "location",
        "n_classes": len(class_names),
        "class_names": class_names,
        "modality": "tabular",
        "image_shape": None,
        "origin": origin,
        "label_mapping": mapping,
        "n_features": int(X.shape[1]),
    }
    return SourceData(X=X, y=y, ids=make_ids("location", len(y)), meta=meta)
