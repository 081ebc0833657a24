"""What a history record says about the workspace a run happened in: commit, dirty flag, code hash, data
digest and identity, and the code files changed between two commits."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privaudit.history.store import HistoryError, git
from privaudit.repro.provenance import CODE_PATHS, canonical_sha256

__all__ = ["CODE_GLOBS", "changed_code_files", "code_sha256", "commit_and_dirty", "data_digest", "dataset_identity",
           "params_hashes"]

#: the code whose content a record hashes (``code_sha256``): the library, the stages and the pipeline
CODE_GLOBS: tuple[str, ...] = ("src/**/*.py", "src/**/*.c", "stages/*.py", "dvc.yaml")


def commit_and_dirty(repo: Path) -> tuple[str | None, bool | None]:
    """``(HEAD, dirty)``: dirty = uncommitted changes to tracked files under the audited paths
    (:data:`privaudit.repro.provenance.CODE_PATHS`); ``(None, None)`` before the first commit."""
    head = git(repo, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
    if head.returncode != 0 or not head.stdout.strip():
        return None, None
    status = git(repo, "status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS, check=False)
    return head.stdout.strip(), None if status.returncode != 0 else bool(status.stdout.strip())


def code_sha256(repo: Path) -> str:
    """sha256 over the paths and contents of the files of :data:`CODE_GLOBS` (sorted; ``__pycache__`` left out)."""
    h = hashlib.sha256()
    files = sorted({p for pattern in CODE_GLOBS for p in repo.glob(pattern)
                    if p.is_file() and "__pycache__" not in p.parts})
    for path in files:
        h.update(path.relative_to(repo).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def changed_code_files(repo: Path) -> Callable[[str, str], list[str] | None]:
    """``(old, new) -> files under src/, stages/, dvc.yaml changed between the commits`` (``None``: git cannot say,
    e.g. a commit not in this clone)."""

    def changed(old: str, new: str) -> list[str] | None:
        try:
            proc = git(repo, "diff", "--name-only", old, new, "--", "src", "stages", "dvc.yaml", check=False)
        except HistoryError:
            return None
        return proc.stdout.split() if proc.returncode == 0 else None

    return changed


def data_digest(source: Path) -> str | None:
    """A digest of the ingested data set in ``source`` (``data/source``): the ``digest`` that ``meta.json``
    records where the ingest stage wrote one, else sha256 over the arrays of ``source.npz`` (each member's
    name and uncompressed bytes: the zip's timestamps left out, so a rerun of ingest keeps it) and
    ``meta.json`` as canonical JSON. ``None`` when nothing was ingested."""
    meta_path, npz = source / "meta.json", source / "source.npz"
    meta: Any = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else None
    if isinstance(meta, dict) and isinstance(meta.get("digest"), str):
        return meta["digest"]
    if not npz.is_file():
        return None
    h = hashlib.sha256()
    with zipfile.ZipFile(npz) as archive:
        for name in sorted(archive.namelist()):
            h.update(name.encode() + b"\0")
            with archive.open(name) as member:
                while chunk := member.read(1 << 20):
                    h.update(chunk)
    h.update(canonical_sha256(meta).encode())
    return h.hexdigest()


def dataset_identity(dataset: Any) -> str:
    """The identity releases on the same people are grouped by: ``dataset.identity`` where the params have one,
    else the data source, ``dataset.name`` (plus ``dataset.path`` for a file source)."""
    identity = getattr(dataset, "identity", None)
    if identity:
        return str(identity)
    path = getattr(dataset, "path", None)
    return f"{dataset.name}:{path}" if path else str(dataset.name)


def params_hashes(params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """``(sha256 of the params, {top-level block: sha256})`` (canonical JSON)."""
    return canonical_sha256(params), {key: canonical_sha256(value) for key, value in sorted(params.items())}
