"""Provenance manifest: git revision, dvc.lock hash, params, versions, seeds, data hashes incl. the raw file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from privaudit.repro.provenance import build_manifest, hash_tree, upstream_lock_sha256
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
    assert m["code_revision"] == rev and m["code_dirty"] is False  # no code committed yet: HEAD
    assert m["upstream_lock_sha256"] == upstream_lock_sha256(repo / "dvc.lock")
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


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
        subprocess.run(["git", "add", name], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", message], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def test_manifest_is_a_fixed_point_of_committing_the_audit(tmp_path: Path) -> None:
    """Issue 15: committing the regenerated dvc.lock/metrics/README must not change the next report.

    The manifest names the last commit of the audited code, and hashes dvc.lock without the
    report stage's own entry; a code change or an upstream lock change still shows.
    """
    repo = _repo(tmp_path)
    lock = "schema: '2.0'\nstages:\n  ltu:\n    cmd: x\n  report:\n    outs: [{md5: aaa}]\n"
    code = _commit(repo, {"src/m.py": "x = 1\n", "dvc.lock": lock}, "code")
    first = build_manifest(repo, {}, 1, {})
    _commit(repo, {"dvc.lock": lock.replace("aaa", "bbb"), "README.md": "doc\n"}, "audit results")
    again = build_manifest(repo, {}, 1, {})
    assert again == first and again["code_revision"] == code and again["code_dirty"] is False
    (repo / "src/m.py").write_text("x = 2\n")
    assert build_manifest(repo, {}, 1, {})["code_dirty"] is True
    new = _commit(repo, {"src/m.py": "x = 2\n", "dvc.lock": lock.replace("cmd: x", "cmd: y")}, "code 2")
    later = build_manifest(repo, {}, 1, {})
    assert later["code_revision"] == new and later["upstream_lock_sha256"] != first["upstream_lock_sha256"]


def test_a_stage_after_the_report_does_not_move_its_lock_hash(tmp_path: Path) -> None:
    """The history stage runs after the report on every ``dvc repro``: when the report runs, dvc.lock still holds
    the previous run's history entry. Hashing it made a fresh clone's ``make audit`` rewrite the committed report
    (and dvc.lock) with every input the same; only the stages upstream of the report count."""
    pipeline = ("stages:\n  ltu:\n    cmd: x\n    outs: [m/ltu.json]\n"
                "  report:\n    cmd: r\n    deps: [m/ltu.json]\n    outs: [m/gate.json]\n"
                "  history:\n    cmd: h\n    deps: [m/gate.json]\n")
    (tmp_path / "dvc.yaml").write_text(pipeline)
    lock = ("schema: '2.0'\nstages:\n  ltu:\n    cmd: x\n  report:\n    cmd: r\n"
            "  history:\n    cmd: h\n    deps: [{path: m/gate.json, md5: aaa}]\n")
    (tmp_path / "dvc.lock").write_text(lock)
    first = upstream_lock_sha256(tmp_path / "dvc.lock")
    (tmp_path / "dvc.lock").write_text(lock.replace("aaa", "bbb"))  # the history entry of another run
    assert upstream_lock_sha256(tmp_path / "dvc.lock") == first
    (tmp_path / "dvc.lock").write_text(lock.replace("cmd: x", "cmd: y"))  # an upstream entry still counts
    assert upstream_lock_sha256(tmp_path / "dvc.lock") != first
