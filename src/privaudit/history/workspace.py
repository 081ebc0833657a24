"""What a history record says about the workspace a run happened in: commit, dirty flag, code hash, and the code
files changed between two commits (the data's identity and digest are the ingest stage's stamp)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privaudit.history.store import HistoryError, git
from privaudit.repro.provenance import CODE_PATHS, canonical_sha256

__all__ = ["CODE_GLOBS", "changed_code_files", "code_sha256", "commit_and_dirty", "params_hashes"]

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


def params_hashes(params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """``(sha256 of the params, {top-level block: sha256})`` (canonical JSON)."""
    return canonical_sha256(params), {key: canonical_sha256(value) for key, value in sorted(params.items())}
