"""Atomic outputs: a stage writes into a temporary sibling, then renames it into place.

A failed stage therefore never leaves a partial ``data/...`` directory or metrics file that
a later stage or ``dvc`` could mistake for a result, and earlier outputs stay untouched until
the new ones are complete (DESIGN.md, "Every stage writes its outputs atomically").
"""

from __future__ import annotations

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


def read_json(path: str | Path) -> Any:
    """Read JSON, with an error naming the file when it is missing or corrupt."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{p} not found (run the stage that writes it first: dvc repro)") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{p} is not valid JSON ({err.msg} at line {err.lineno}); the file is corrupt") from None
