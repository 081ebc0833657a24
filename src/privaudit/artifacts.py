"""Atomic outputs: a stage writes into a temporary sibling, then renames it into place.

A failed stage therefore never leaves a partial ``data/...`` directory or metrics file that
a later stage or ``dvc`` could mistake for a result, and earlier outputs stay untouched until
the new ones are complete (docs/architecture.md, "Atomic outputs").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np


class OutputError(OSError):
    """An output location cannot be written (the message names the path)."""


def _check_parent_writable(target: Path) -> Path:
    parent = target.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create output directory {parent}: {err.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"output directory {parent} is not writable")
    return parent


def ensure_writable(*targets: str | Path) -> None:
    """Fail early, before expensive work, if any output location cannot be written."""
    for t in targets:
        _check_parent_writable(Path(t))


@contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary directory; on success replace ``target`` with it.

    On an exception the temporary directory is removed and ``target`` is left as it was.
    """
    target = Path(target)
    parent = _check_parent_writable(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)


@contextmanager
def atomic_file(target: str | Path, mode: str = "w") -> Iterator[Any]:
    """Open a temporary sibling of ``target`` for writing; rename it into place on success."""
    target = Path(target)
    parent = _check_parent_writable(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def to_jsonable(obj: Any) -> Any:
    """numpy scalars/arrays → Python; non-finite floats → None (JSON has no NaN/inf)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    return obj


def dumps_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, 2-space indent, trailing newline (byte-stable across runs)."""
    return json.dumps(to_jsonable(obj), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically write ``obj`` as canonical JSON to ``path``."""
    with atomic_file(path) as fh:
        fh.write(dumps_json(obj))


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes (``hashlib.file_digest``, streamed), e.g. ``"sha256"`` or DVC's ``"md5"``."""
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, algorithm).hexdigest()


def read_json(path: str | Path) -> Any:
    """Read JSON, with an error naming the file when it is missing or corrupt."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{p} not found (run the stage that writes it first: dvc repro)") from None
    except json.JSONDecodeError as err:
        where = f"line {err.lineno} column {err.colno}"
        raise ValueError(f"{p} is not valid JSON ({err.msg}: {where}); the file is corrupt") from None


def canonical_safetensors(data: bytes) -> bytes:
    """A safetensors file (``safetensors.*.save`` output) with its ``__metadata__`` keys sorted.

    The safetensors writer keeps the metadata in a Rust ``HashMap``, whose iteration order is
    randomised per process: the same model saved twice gives two files that differ in the order
    of the metadata keys, so DVC would see a changed ``model.safetensors`` (and rewrite
    ``dvc.lock``) on every run. The header is rewritten as compact JSON with the metadata keys in
    sorted order, the tensor entries in the writer's (deterministic) order, padded with spaces to
    a multiple of 8 bytes as the format requires; the tensor bytes are unchanged (their offsets
    are relative to the end of the header).

    Raises:
        ValueError: ``data`` is not a safetensors file.
    """
    if len(data) < 8:
        raise ValueError("not a safetensors file: shorter than its 8-byte header length")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise ValueError(f"not a safetensors file: header length {n} exceeds the {len(data) - 8} bytes left")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not a safetensors file: header is not JSON ({err})") from None
    if not isinstance(header, dict):
        raise ValueError("not a safetensors file: header is not a JSON object")
    out: dict[str, Any] = {}
    meta = header.pop("__metadata__", None)
    if meta is not None:
        out["__metadata__"] = {str(k): meta[k] for k in sorted(meta)}
    out.update(header)
    text = json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n:]


def write_safetensors(path: str | Path, data: bytes) -> None:
    """Atomically write the safetensors bytes ``data`` (``safetensors.torch.save`` /
    ``safetensors.numpy.save``) to ``path``, canonicalised: equal models give byte-identical files."""
    with atomic_file(path, "wb") as fh:
        fh.write(canonical_safetensors(data))
