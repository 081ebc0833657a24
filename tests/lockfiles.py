"""A ``dvc.lock`` as DVC writes it after a successful ``dvc repro``, for tests that build a finished
pipeline by hand: every dep and out that exists carries its real DVC md5
(:func:`privaudit.repro.provenance.dvc_md5`) and every stage records the params values ``params.yaml``
holds. The gate's provenance check fails closed, so a hand-made lock with made-up hashes reads as stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from privaudit.repro.provenance import _dvcignore, _entries, _param_keys, _stage_outs, dotted_get, dvc_md5, load_yaml


def _files(repo: Path, paths: list[str], ignore: Any) -> list[dict[str, Any]]:
    out = []
    for rel in paths:
        digest = dvc_md5(repo / rel, ignore, repo)
        if digest is not None:  # DVC would refuse a missing dep; tests leave code deps out
            out.append({"path": rel, "hash": "md5", "md5": digest})
    return out


def consistent_lock(repo: Path, params_file: str = "params.yaml") -> dict[str, Any]:
    """The lock of ``repo/dvc.yaml`` after every stage ran on the files now on disk."""
    repo = Path(repo)
    stages: Mapping[str, Any] = (load_yaml(repo / "dvc.yaml") or {}).get("stages") or {}
    ignore = _dvcignore(repo)
    lock: dict[str, Any] = {"schema": "2.0", "stages": {}}
    for name, spec in stages.items():
        entry: dict[str, Any] = {"cmd": spec.get("cmd", "x")}
        deps = _files(repo, sorted(_entries(spec.get("deps"))), ignore)
        if deps:
            entry["deps"] = deps
        params = {}
        for file, keys in _param_keys(spec, params_file).items():
            data = load_yaml(repo / file) if (repo / file).is_file() else {}
            params[file] = {k: dotted_get(data, k) for k in sorted(keys)}
        if params:
            entry["params"] = params
        outs = _files(repo, _stage_outs(spec), ignore)
        if outs:
            entry["outs"] = outs
        lock["stages"][name] = entry
    return lock


def write_consistent_lock(repo: Path) -> dict[str, Any]:
    """Write :func:`consistent_lock` to ``repo/dvc.lock`` and return it."""
    lock = consistent_lock(repo)
    (Path(repo) / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    return lock
