"""Provenance manifest: what is needed to reproduce an audit later.

Git revision (and whether the tree was dirty), the hash of ``dvc.lock``, the params, the
root seed, package versions and content hashes of the data files the audit read.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

PACKAGES = ("privaudit", "numpy", "scipy", "pandas", "scikit-learn", "torch", "opacus", "dvc",
            "great-expectations", "prefect", "skops", "safetensors")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_tree(root: Path) -> str:
    """SHA-256 over the relative paths and contents of every file under ``root`` (sorted)."""
    h = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(root) if p != root else p.name).encode())
        h.update(sha256_file(p).encode())
    return h.hexdigest()


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for n in names:
        try:
            versions[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            versions[n] = None
    return versions


def derived_seeds(seed: int, params: dict[str, Any]) -> dict[str, int]:
    """The integer seeds the stages derive from ``base.seed`` (:mod:`privaudit.seeding`), by stream name.

    Only the streams that take an integer seed are listed (defender training); numpy
    generators are spawned from ``SeedSequence(base.seed, names)`` and follow from the seed.
    """
    from privaudit.seeding import int_seed

    names = [d.get("name") for d in params.get("defenders") or [] if isinstance(d, dict) and d.get("name")]
    return {f"defenders.{n}": int_seed(seed, "defenders", n) for n in names}


def dataset_file(params: dict[str, Any], repo: Path) -> Path | None:
    """``dataset.path`` as a path (relative paths against ``repo``), or None when unset."""
    raw = (params.get("dataset") or {}).get("path")
    if raw is None or str(raw).strip() == "":
        return None
    path = Path(str(raw)).expanduser()
    return path if path.is_absolute() else repo / path


def build_manifest(repo: Path, params: dict[str, Any], seed: int, data_paths: dict[str, Path]) -> dict[str, Any]:
    """The manifest written into every report.

    Args:
        repo: repository root (for git and ``dvc.lock``).
        params: the validated params (``Params.model_dump(mode="json")``).
        seed: ``base.seed``.
        data_paths: name → file or directory whose content hash is recorded. The raw data set
            (``dataset.path``, file or folder) is added as ``dataset`` when set.

    Returns:
        ``{git_revision, git_dirty, dvc_lock_sha256, seed, seeds, params, python, platform,
        packages, data_sha256: {name: hex}, dataset_path}``. ``dvc_lock_sha256`` is the lock
        as it stood when the report stage started (the upstream stages' entries are final).
    """
    lock = repo / "dvc.lock"
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=repo)
    paths = dict(data_paths)
    raw = dataset_file(params, repo)
    if raw is not None:
        paths["dataset"] = raw
    return {
        "git_revision": _git("rev-parse", "HEAD", cwd=repo),
        "git_dirty": None if status is None else bool(status),
        "dvc_lock_sha256": sha256_file(lock) if lock.is_file() else None,
        "seed": seed,
        "seeds": {"base.seed": seed, **derived_seeds(seed, params)},
        "params": params,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "data_sha256": {k: hash_tree(p) for k, p in sorted(paths.items()) if p.exists()},
        "dataset_path": None if raw is None else str(raw),
    }
