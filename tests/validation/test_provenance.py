"""Provenance manifest: git revision, dvc.lock hash, params, versions, seeds, data hashes incl. the raw file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from privaudit.provenance import build_manifest, hash_tree, sha256_file
from privaudit.seeding import int_seed


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "dvc.lock").write_text("schema: '2.0'\n")
    subprocess.run(["git", "add", "dvc.lock"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "x"], cwd=repo, check=True)
    return repo


def test_manifest_records_everything(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    raw = repo / "raw" / "table.csv"
    raw.parent.mkdir()
    raw.write_text("a,label\n1,0\n")
    source = repo / "data" / "source"
    source.mkdir(parents=True)
    (source / "x.npz").write_bytes(b"123")
    params = {"base": {"seed": 7}, "dataset": {"name": "csv", "path": "raw/table.csv"},
              "defenders": [{"name": "logreg", "kind": "logistic_regression"}]}
    m = build_manifest(repo, params, 7, {"source": source, "missing": repo / "nope"})
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert m["git_revision"] == rev and m["git_dirty"] is False
    assert m["dvc_lock_sha256"] == sha256_file(repo / "dvc.lock")
    assert m["params"] == params and m["seed"] == 7
    assert m["seeds"] == {"base.seed": 7, "defenders.logreg": int_seed(7, "defenders", "logreg")}
    assert m["data_sha256"] == {"dataset": hash_tree(raw), "source": hash_tree(source)}
    assert m["dataset_path"] == str(raw)
    assert m["packages"]["numpy"] and m["python"]


def test_dataset_hash_changes_with_the_raw_file(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    folder = tmp_path / "images"
    (folder / "cat").mkdir(parents=True)
    (folder / "cat" / "1.png").write_bytes(b"a")
    params = {"dataset": {"name": "imagefolder", "path": str(folder)}}
    first = build_manifest(repo, params, 1, {})["data_sha256"]["dataset"]
    (folder / "cat" / "1.png").write_bytes(b"b")
    assert build_manifest(repo, params, 1, {})["data_sha256"]["dataset"] != first
    assert "dataset" not in build_manifest(repo, {"dataset": {"name": "digits", "path": None}}, 1, {})["data_sha256"]
