"""``data/user_code.json``: the files behind ``kind: python`` defenders and their hashes (issue 15, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from privaudit.repro.user_code import UserCodeError, resolve_module_file, user_code_manifest

REPO = Path(__file__).resolve().parents[2]
TRAINER = "def train(X, y, n_classes, seed, **options):\n    raise NotImplementedError\n"


def _params(*defenders: dict) -> dict:
    return {"defenders": [{"name": "logreg", "kind": "logistic_regression"}, *defenders]}


def test_file_target_hash_changes_only_when_the_file_changes(tmp_path: Path) -> None:
    (tmp_path / "trainers").mkdir()
    trainer = tmp_path / "trainers" / "mine.py"
    trainer.write_text(TRAINER)
    params = _params({"name": "mine", "kind": "python", "target": "trainers/mine.py:train"})

    first = user_code_manifest(params, tmp_path)
    assert list(first) == ["mine"]  # only python defenders
    assert first["mine"]["target_file"] == "trainers/mine.py"  # relative: the same in every clone
    assert user_code_manifest(params, tmp_path) == first  # nothing changed → same hash

    trainer.write_text(TRAINER + "# tuned\n")
    second = user_code_manifest(params, tmp_path)
    assert second["mine"]["sha256"] != first["mine"]["sha256"]
    trainer.write_text(TRAINER)
    assert user_code_manifest(params, tmp_path) == first


def test_module_target_resolves_to_its_file(tmp_path: Path) -> None:
    pkg = f"usercode_pkg_{uuid.uuid4().hex[:8]}"  # fresh name: find_spec caches parent packages
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "trainer.py").write_text(TRAINER)
    (tmp_path / pkg / "loading.py").write_text("def load(state, n_classes):\n    return None\n")
    params = _params({"name": "m", "kind": "python", "target": f"{pkg}.trainer:train", "loader": f"{pkg}.loading:load"})

    entry = user_code_manifest(params, tmp_path)["m"]
    assert entry["target_file"] == f"{pkg}/trainer.py"
    assert entry["loader_file"] == f"{pkg}/loading.py"
    assert entry["loader_sha256"] != entry["sha256"]
    assert str(tmp_path) not in sys.path  # the root was on sys.path only while resolving
    assert resolve_module_file(f"{pkg}.trainer:train", tmp_path) == (tmp_path / pkg / "trainer.py").resolve()

    (tmp_path / pkg / "loading.py").write_text("def load(state, n_classes):\n    return 1\n")
    again = user_code_manifest(params, tmp_path)["m"]
    assert again["loader_sha256"] != entry["loader_sha256"] and again["sha256"] == entry["sha256"]


def test_the_example_trainer_resolves(tmp_path: Path) -> None:
    params = _params({"name": "u", "kind": "python", "target": "examples/user_trainer.py:train",
                      "loader": "examples/user_trainer.py:load"})
    entry = user_code_manifest(params, REPO)["u"]
    assert entry["target_file"] == entry["loader_file"] == "examples/user_trainer.py"


@pytest.mark.parametrize(("target", "message"), [
    ("missing/file.py:train", "no file"),
    ("no_such_module_xyz_123.sub:train", "cannot locate module|no module named"),
    ("no_colon", "must look like"),
    ("sys:exit", "no source file"),  # a built-in module: nothing to hash
])
def test_unresolvable_target_names_the_key(tmp_path: Path, target: str, message: str) -> None:
    params = _params({"name": "u", "kind": "python", "target": target})
    with pytest.raises(UserCodeError, match=message) as raised:
        user_code_manifest(params, tmp_path)
    assert "defenders[1].target" in str(raised.value)


def test_stage_writes_canonical_json_without_torch(tmp_path: Path) -> None:
    """The stage run twice gives the same bytes (DVC sees the same hash); a trainer edit changes them."""
    (tmp_path / "t.py").write_text(TRAINER)
    params = tmp_path / "params.yaml"
    params.write_text("defenders:\n  - {name: u, kind: python, target: 't.py:train'}\n")
    out = tmp_path / "data" / "user_code.json"
    code = ("import sys; from stages.user_code import main; "
            f"rc = main(['--params', {str(params)!r}, '--out', {str(out)!r}, '--repo', {str(tmp_path)!r}]); "
            "assert 'torch' not in sys.modules, 'the user_code stage imported torch'; sys.exit(rc)")

    def run() -> bytes:
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return out.read_bytes()

    first = run()
    assert json.loads(first)["u"]["target_file"] == "t.py"
    assert run() == first
    (tmp_path / "t.py").write_text(TRAINER + "\n# edited\n")
    assert run() != first


def test_stage_fails_cleanly_on_a_bad_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stages.user_code import main

    params = tmp_path / "params.yaml"
    params.write_text("defenders:\n  - {name: u, kind: python, target: 'gone.py:train'}\n")
    assert main(["--params", str(params), "--out", str(tmp_path / "u.json"), "--repo", str(tmp_path)]) == 1
    assert "defenders[0].target" in capsys.readouterr().err
    assert not (tmp_path / "u.json").exists()


def test_local_modules_the_trainer_imports_are_hashed(tmp_path: Path) -> None:
    """Issue 28 item 1: a helper module of the user's own is part of the trainer's hash."""
    pkg = f"helpers_{uuid.uuid4().hex[:8]}"
    (tmp_path / "trainers").mkdir()
    (tmp_path / pkg / "sub").mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "sub" / "__init__.py").write_text("from . import deep\n")
    (tmp_path / pkg / "sub" / "deep.py").write_text("LR = 0.3\n")
    (tmp_path / pkg / "sub" / "unused.py").write_text("X = 1\n")
    (tmp_path / "trainers" / "sibling.py").write_text("import numpy as np\nimport privaudit.hooks\n")
    (tmp_path / "trainers" / "mine.py").write_text(
        f"import os, numpy\nfrom {pkg}.sub import deep\n"
        "def train(X, y, n_classes, seed):\n    import sibling  # next to the file\n    return deep.LR\n")
    params = _params({"name": "mine", "kind": "python", "target": "trainers/mine.py:train"})

    entry = user_code_manifest(params, tmp_path)["mine"]
    assert sorted(entry["imports"]) == [f"{pkg}/__init__.py", f"{pkg}/sub/__init__.py", f"{pkg}/sub/deep.py",
                                        "trainers/sibling.py"]  # not numpy, os, privaudit, unused.py
    (tmp_path / pkg / "sub" / "deep.py").write_text("LR = 0.2\n")  # the reported edit, one import away
    again = user_code_manifest(params, tmp_path)["mine"]
    assert again["sha256"] == entry["sha256"]
    assert again["imports"][f"{pkg}/sub/deep.py"] != entry["imports"][f"{pkg}/sub/deep.py"]

    single = user_code_manifest(_params({"name": "u", "kind": "python", "target": f"{pkg}/sub/deep.py:LR"}),
                                tmp_path)["u"]
    assert "imports" not in single  # a self-contained file keeps the old manifest entry


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, timeout=60)


def test_stage_refuses_an_untracked_trainer_or_helper(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 item 3: `dvc exp run` leaves untracked files out; the user_code stage says so and how to fix it."""
    from stages.user_code import main

    # `python -m stages.user_code`, run by dvc in the repository, has the repository on sys.path: the
    # params validation imports the trainer, which imports its helper from there
    monkeypatch.syspath_prepend(str(tmp_path))

    _git(tmp_path, "init", "-q")
    (tmp_path / "t.py").write_text("import helper\n" + TRAINER)
    (tmp_path / "helper.py").write_text("K = 1\n")
    params = tmp_path / "params.yaml"
    params.write_text("defenders:\n  - {name: u, kind: python, target: 't.py:train'}\n")
    out = tmp_path / "u.json"
    argv = ["--params", str(params), "--out", str(out), "--repo", str(tmp_path)]

    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "helper.py, t.py (code of defender(s) u) not tracked by git" in err
    assert "`git add helper.py t.py`" in err and not out.exists()
    _git(tmp_path, "add", "t.py")
    assert main(argv) == 1
    assert "`git add helper.py`" in capsys.readouterr().err
    _git(tmp_path, "add", "helper.py")  # staged is enough: dvc exp run commits tracked files
    assert main(argv) == 0 and out.exists()


# --------------------------------------------------------------------------- issue 34: after `dvc exp run`

_EXP_DVC_YAML = """stages:
  user_code:
    cmd: python -m stages.user_code --params params.yaml --out user_code.json
    always_changed: true
    params:
      - exp.yaml:
          - x
    outs:
      - user_code.json
"""


def _run(root: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO), "DVC_NO_ANALYTICS": "1", "DO_NOT_TRACK": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    env = {k: v for k, v in env.items() if not k.startswith("DVC_EXP_")}
    return subprocess.run(list(cmd), cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _tracked(root: Path, name: str) -> bool:
    return bool(_run(root, "git", "ls-files", "--", name).stdout.strip())


def _exp_tree(root: Path, name: str) -> list[str]:
    head = _run(root, "git", "rev-parse", "HEAD").stdout.strip()
    return _run(root, "git", "ls-tree", "-r", "--name-only", f"refs/exps/{head[:2]}/{head[2:]}/{name}").stdout.split()


def test_a_staged_trainer_survives_dvc_exp_run(tmp_path: Path) -> None:
    """Issue 34: `git add` is enough for `dvc repro`, `dvc exp run`, `dvc repro` after it and a second `dvc exp run`.

    DVC's workspace experiment ends with a mixed reset to HEAD (scmrepo ``detach_head``): the
    staged-only trainer is untracked afterwards, though the experiment commit holds it. The stage
    stages it again; a helper never staged is still refused, in an experiment too.
    """
    dvc = [sys.executable, "-m", "dvc"]
    _run(tmp_path, "git", "init", "-q")
    assert _run(tmp_path, *dvc, "init", "-q").returncode == 0
    (tmp_path / "dvc.yaml").write_text(_EXP_DVC_YAML)
    (tmp_path / "exp.yaml").write_text("x: 1\n")
    (tmp_path / "params.yaml").write_text("defenders:\n  - {name: u, kind: python, target: 't.py:train'}\n")
    _run(tmp_path, "git", "add", "-A")
    assert _run(tmp_path, "git", "commit", "-q", "--no-gpg-sign", "-m", "pipeline").returncode == 0
    (tmp_path / "t.py").write_text(TRAINER)
    _run(tmp_path, "git", "add", "t.py")  # staged, never committed: the README's "git add is enough"

    first = _run(tmp_path, *dvc, "repro")
    assert first.returncode == 0, first.stdout + first.stderr
    exp1 = _run(tmp_path, *dvc, "exp", "run", "-n", "one", "-S", "exp.yaml:x=2")
    assert exp1.returncode == 0, exp1.stdout + exp1.stderr
    assert "t.py" in _exp_tree(tmp_path, "one")
    assert not _tracked(tmp_path, "t.py")  # what DVC does: the index is back to HEAD's

    again = _run(tmp_path, *dvc, "repro")  # `make audit` after the experiment
    assert again.returncode == 0, again.stdout + again.stderr
    assert "staged t.py again (`git add`): experiment one of this commit recorded it" in again.stdout
    assert _tracked(tmp_path, "t.py")

    exp1_again = _run(tmp_path, *dvc, "exp", "run", "-n", "two", "-S", "exp.yaml:x=3")
    assert exp1_again.returncode == 0, exp1_again.stdout + exp1_again.stderr
    assert "t.py" in _exp_tree(tmp_path, "two")
    assert not _tracked(tmp_path, "t.py")
    exp3 = _run(tmp_path, *dvc, "exp", "run", "-n", "three", "-S", "exp.yaml:x=4")  # straight after one
    assert exp3.returncode == 0, exp3.stdout + exp3.stderr
    assert "t.py" in _exp_tree(tmp_path, "three")

    # still refused: a helper that was never staged would be left out of the experiment
    (tmp_path / "helper.py").write_text("K = 1\n")
    (tmp_path / "t.py").write_text("import helper\n" + TRAINER)
    refused = _run(tmp_path, *dvc, "exp", "run", "-n", "four", "-S", "exp.yaml:x=5")
    assert refused.returncode != 0
    assert "helper.py (code of defender(s) u) not tracked by git" in refused.stdout + refused.stderr


def test_restage_only_what_an_experiment_of_head_tracks(tmp_path: Path) -> None:
    """A path only an experiment of another commit tracks, or none, stays untracked; outside git nothing happens."""
    from privaudit.repro.user_code import restage_experiment_files

    assert restage_experiment_files(["t.py"], tmp_path) == {}  # not a git work tree
    _git(tmp_path, "init", "-q")
    (tmp_path / "t.py").write_text(TRAINER)
    (tmp_path / "other.py").write_text(TRAINER)
    assert restage_experiment_files(["t.py"], tmp_path) == {}  # no commit yet
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    (tmp_path / "base.txt").write_text("1\n")
    _git(tmp_path, "add", "base.txt")
    _git(tmp_path, *ident, "commit", "-q", "--no-gpg-sign", "-m", "base")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    # an experiment commit on HEAD holding t.py (as `dvc exp run` leaves it), then the index back to HEAD
    _git(tmp_path, "add", "t.py")
    tree = subprocess.run(["git", "write-tree"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    exp = subprocess.run(["git", *ident, "commit-tree", tree, "-p", head, "-m", "dvc: commit experiment"],
                         cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    _git(tmp_path, "update-ref", f"refs/exps/{head[:2]}/{head[2:]}/bold-exp", exp)
    _git(tmp_path, "reset", "-q")
    _git(tmp_path, "update-ref", "refs/exps/00/0000000000000000000000000000000000000/elsewhere", exp)

    assert restage_experiment_files(["other.py", "t.py"], tmp_path) == {"t.py": "bold-exp"}
    listed = subprocess.run(["git", "ls-files"], cwd=tmp_path, capture_output=True, text=True).stdout.split()
    assert listed == ["base.txt", "t.py"]
