"""The gate's provenance block: stable after a successful run, refused after any upstream change (issue 15, item 3)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from privaudit.repro.provenance import lock_drift, provenance_drift, provenance_stamp, upstream_stages

DVC_YAML = """
stages:
  user_code:
    cmd: python -m stages.user_code
    always_changed: true
    outs: [data/user_code.json]
  prep:
    cmd: python prep.py
    deps: [stages/prep.py, data/external]
    params: [prep.n]
    outs: [data/prep]
  score:
    cmd: python score.py
    deps: [data/prep, data/user_code.json, src/lib]
    params: [score.k, score.opts]
    outs: [data/scores]
    metrics:
      - metrics/score.json:
          cache: false
  unrelated:
    cmd: python other.py
    params: [other.x]
    outs: [data/other]
  report:
    cmd: python -m stages.report
    deps: [stages/report.py, src/lib, data/scores, metrics/score.json]
    params: [gate.min, {extra.yaml: [title]}]
    metrics:
      - metrics/gate.json:
          cache: false
"""

PARAMS = {"prep": {"n": 3}, "score": {"k": 1.0e-5, "opts": [1, {"a": None}]}, "other": {"x": 1},
          "gate": {"min": 0.2}, "compute": {"scheduler": "local"},
          "defenders": [{"name": "u", "kind": "python", "target": "trainer.py:train"}]}


#: the gate the report stage wrote, as recorded in dvc.lock (md5 of its bytes, as DVC 3 records it)
GATE = b'{"passed": true}\n'


def _lock(prep_md5: str = "p1", score_dep_prep: str = "p1", params: dict | None = None) -> dict:
    p = params or PARAMS
    return {"schema": "2.0", "stages": {
        "user_code": {"cmd": "x", "outs": [{"path": "data/user_code.json", "hash": "md5", "md5": "u1"}]},
        "prep": {"cmd": "x", "deps": [{"path": "data/external", "md5": "e1.dir"}],
                 "params": {"params.yaml": {"prep.n": p["prep"]["n"]}},
                 "outs": [{"path": "data/prep", "hash": "md5", "md5": prep_md5}]},
        "score": {"cmd": "x", "deps": [{"path": "data/prep", "md5": score_dep_prep},
                                       {"path": "data/user_code.json", "md5": "u1"}],
                  "params": {"params.yaml": {"score.k": p["score"]["k"], "score.opts": p["score"]["opts"]}},
                  "outs": [{"path": "data/scores", "md5": "s1.dir"}, {"path": "metrics/score.json", "md5": "m1"}]},
        "report": {"cmd": "x", "deps": [{"path": "data/scores", "md5": "s1.dir"}, {"path": "metrics/score.json", "md5": "m1"}],
                   "params": {"params.yaml": {"gate.min": p["gate"]["min"]}, "extra.yaml": {"title": "t"}},
                   "outs": [{"path": "metrics/gate.json", "hash": "md5", "md5": hashlib.md5(GATE).hexdigest()}]},
    }}


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A finished pipeline: dvc.yaml, a consistent dvc.lock, params, the report's inputs on disk."""
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / ".dvcignore").write_text("__pycache__\n*.pyc\n")
    (tmp_path / "params.yaml").write_text("# comments do not count\n" + yaml.safe_dump(PARAMS))
    (tmp_path / "extra.yaml").write_text("title: t\n")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(_lock(), sort_keys=False))
    (tmp_path / "data" / "scores").mkdir(parents=True)
    (tmp_path / "data" / "scores" / "a.parquet").write_bytes(b"scores")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "score.json").write_text('{"s": 1}\n')
    (tmp_path / "metrics" / "gate.json").write_bytes(GATE)
    (tmp_path / "trainer.py").write_text("def train(*a):\n    pass\n")
    from privaudit.artifacts import write_json
    from privaudit.repro.user_code import user_code_manifest

    write_json(tmp_path / "data" / "user_code.json", user_code_manifest(PARAMS, tmp_path))
    return tmp_path


def _stamp(repo: Path) -> dict:
    return json.loads(json.dumps(provenance_stamp(repo, "report")))  # as read back from gate.json


def test_stamp_lists_the_data_inputs_params_and_upstream(repo: Path) -> None:
    stamp = _stamp(repo)
    assert [p for p, _ in stamp["inputs"]] == ["data/scores", "metrics/score.json"]  # no code deps
    assert stamp["params"] == [["extra.yaml", "title"], ["params.yaml", "gate.min"]]
    assert stamp["pipeline"] == ["prep", "report", "score", "user_code"]  # not 'unrelated'
    assert upstream_stages(yaml.safe_load(DVC_YAML)["stages"], "score") == ["prep", "score", "user_code"]
    assert _stamp(repo) == stamp  # deterministic
    assert provenance_drift(stamp, repo) == []


def test_unchanged_workspace_stays_fresh(repo: Path) -> None:
    """What a successful `dvc repro` cannot clear must never make the gate stale."""
    stamp = _stamp(repo)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["compute"]["scheduler"] = "tcp://h:8786"  # no stage tracks it: dvc repro would do nothing
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))  # reordered, comments gone
    (repo / "data" / "scores" / "__pycache__").mkdir()  # .dvcignore'd, as DVC ignores it
    (repo / "data" / "scores" / "__pycache__" / "x.pyc").write_bytes(b"1")
    (repo / "dvc.lock").write_text(yaml.safe_dump(_lock(), sort_keys=True))  # re-serialised lock
    assert provenance_drift(stamp, repo) == []


def test_changed_input_is_named(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "data" / "scores" / "a.parquet").write_bytes(b"other scores")
    assert provenance_drift(stamp, repo) == ["data/scores changed since the gate was computed"]
    (repo / "metrics" / "score.json").unlink()
    assert "metrics/score.json is missing" in provenance_drift(stamp, repo)


def test_changed_gate_param_is_named(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "extra.yaml").write_text("title: new\n")
    problems = provenance_drift(stamp, repo)
    assert any("the gate's params changed" in p and "title" in p for p in problems)
    assert any("extra.yaml title changed (stage 'report' ran with 't'" in p for p in problems)


def test_failed_run_with_new_params_is_stale(repo: Path) -> None:
    """`dvc exp run -S prep.n=4` failing in its first stage: only params.yaml moved."""
    stamp = _stamp(repo)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["prep"]["n"] = 4
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert provenance_drift(stamp, repo) == ["params.yaml prep.n changed (stage 'prep' ran with 3, now 4)"]
    del params["score"]["k"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert "params.yaml score.k changed (stage 'score' ran with 1e-05, now unset)" in provenance_drift(stamp, repo)


def test_run_that_stopped_midway_is_stale(repo: Path) -> None:
    """prep succeeded on new data (its lock entry moved), score failed: the lock is inconsistent."""
    stamp = _stamp(repo)
    (repo / "dvc.lock").write_text(yaml.safe_dump(_lock(prep_md5="p2")))
    assert provenance_drift(stamp, repo) == [
        "data/prep changed (written by stage 'prep'; stage 'score' has not run on it)"]


def test_stage_missing_from_the_lock(repo: Path) -> None:
    lock = _lock()
    del lock["stages"]["score"]
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert lock_drift(repo, ["score"]) == ["stage 'score' has no entry in dvc.lock (it has not run)"]
    (repo / "dvc.lock").unlink()
    assert lock_drift(repo, ["score"]) == ["dvc.lock is missing"]


def test_edited_user_trainer_is_stale_until_user_code_reruns(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "trainer.py").write_text("def train(*a):\n    return 1\n")
    assert provenance_drift(stamp, repo) == ["user code of defender 'u' changed (trainer.py)"]
    from privaudit.artifacts import write_json
    from privaudit.repro.user_code import user_code_manifest

    write_json(repo / "data" / "user_code.json", user_code_manifest(PARAMS, repo))  # the user_code stage ran
    assert provenance_drift(stamp, repo) == []


@pytest.mark.parametrize("block", [None, {"version": 99}, {"version": 1, "params": []}])
def test_missing_or_foreign_provenance_raises(repo: Path, block: object) -> None:
    with pytest.raises(ValueError, match="no provenance block|version 99|malformed"):
        provenance_drift(block, repo)


def test_without_dvc_yaml_the_whole_params_file_counts(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("a: 1\n")
    (tmp_path / "in.json").write_text("{}")
    stamp = json.loads(json.dumps(provenance_stamp(tmp_path, inputs=["in.json"])))
    assert stamp["params"] == [["params.yaml", None]] and stamp["pipeline"] == []
    assert provenance_drift(stamp, tmp_path) == []
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert provenance_drift(stamp, tmp_path) == ["the gate's params changed since it was computed (params.yaml)"]


def test_edited_helper_module_of_the_trainer_is_stale(repo: Path) -> None:
    """Issue 28 item 1: an edit one import away from the trainer makes the gate stale, naming the file."""
    (repo / "trainer.py").write_text("from mylib import lr\ndef train(*a):\n    return lr.LR\n")
    (repo / "mylib").mkdir()
    (repo / "mylib" / "__init__.py").write_text("")
    (repo / "mylib" / "lr.py").write_text("LR = 0.3\n")
    from privaudit.artifacts import write_json
    from privaudit.repro.user_code import user_code_manifest

    write_json(repo / "data" / "user_code.json", user_code_manifest(PARAMS, repo))  # the user_code stage ran
    stamp = _stamp(repo)
    assert provenance_drift(stamp, repo) == []
    (repo / "mylib" / "lr.py").write_text("LR = 0.2\n")
    assert provenance_drift(stamp, repo) == ["user code of defender 'u' changed (mylib/lr.py)"]


def test_gate_or_report_not_the_one_dvc_lock_records_is_stale(repo: Path) -> None:
    """Issue 28 item 2: `git checkout <rev> -- dvc.lock metrics && dvc checkout` failing on the report
    (not in a fresh clone's cache) deleted it, and the old gate still read PASS."""
    stamp = _stamp(repo)
    lock = _lock()
    (repo / "reports").mkdir()
    (repo / "reports" / "audit.html").write_text("<html>report</html>")
    (repo / "reports" / "plots").mkdir()
    (repo / "reports" / "plots" / "b.csv").write_text("x\n1\n")
    (repo / "reports" / "plots" / "a.png").write_bytes(b"png")
    (repo / "reports" / "plots" / "__pycache__").mkdir()  # .dvcignore'd: DVC leaves it out of the hash
    (repo / "reports" / "plots" / "__pycache__" / "x.pyc").write_bytes(b"1")
    files = [{"md5": hashlib.md5(b"png").hexdigest(), "relpath": "a.png"},
             {"md5": hashlib.md5(b"x\n1\n").hexdigest(), "relpath": "b.csv"}]
    plots_md5 = hashlib.md5(json.dumps(files, sort_keys=True).encode()).hexdigest() + ".dir"  # DVC's folder hash
    lock["stages"]["report"]["outs"] += [
        {"path": "reports/audit.html", "hash": "md5", "md5": hashlib.md5(b"<html>report</html>").hexdigest()},
        {"path": "reports/plots", "hash": "md5", "md5": plots_md5}]
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert provenance_drift(stamp, repo) == []

    (repo / "reports" / "audit.html").unlink()
    assert provenance_drift(stamp, repo) == ["reports/audit.html is missing (an output of stage 'report' in dvc.lock)"]
    (repo / "reports" / "audit.html").write_text("<html>another run</html>")
    (repo / "reports" / "plots" / "a.png").write_bytes(b"other png")
    (repo / "metrics" / "gate.json").write_text('{"passed": false}\n')  # a gate the lock does not record
    assert provenance_drift(stamp, repo) == [
        "metrics/gate.json is not the version dvc.lock records for stage 'report'",
        "reports/audit.html is not the version dvc.lock records for stage 'report'",
        "reports/plots is not the version dvc.lock records for stage 'report'"]


def test_changed_code_or_external_data_since_the_pipeline_ran_is_stale(repo: Path) -> None:
    """Issue 28 item 1: a gate computed from code (or raw data) that has changed since is not served."""
    from privaudit.repro.provenance import _dvcignore, dvc_md5

    (repo / "src" / "lib").mkdir(parents=True)
    (repo / "src" / "lib" / "core.py").write_text("LR = 0.3\n")
    (repo / "src" / "lib" / "__pycache__").mkdir()  # .dvcignore'd, as DVC ignores it
    (repo / "src" / "lib" / "__pycache__" / "core.pyc").write_bytes(b"1")
    (repo / "data" / "external").mkdir(parents=True)
    (repo / "data" / "external" / "table.csv").write_text("a,b\n1,2\n")
    lock = _lock()
    ext = dvc_md5(repo / "data" / "external", None, repo)
    lib = dvc_md5(repo / "src" / "lib", _dvcignore(repo), repo)
    assert lib != dvc_md5(repo / "src" / "lib", None, repo)  # the .pyc is left out, as DVC leaves it out
    lock["stages"]["prep"]["deps"] = [{"path": "data/external", "hash": "md5", "md5": ext}]
    lock["stages"]["score"]["deps"].append({"path": "src/lib", "hash": "md5", "md5": lib})
    lock["stages"]["report"]["deps"].append({"path": "src/lib", "hash": "md5", "md5": lib})
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    stamp = _stamp(repo)
    assert provenance_drift(stamp, repo) == []

    (repo / "src" / "lib" / "core.py").write_text("LR = 0.2\n")
    (repo / "data" / "external" / "table.csv").write_text("a,b\n1,3\n")
    assert provenance_drift(stamp, repo) == [
        "data/external changed since the gate's pipeline ran (a dependency of stage(s) 'prep')",
        "src/lib changed since the gate's pipeline ran (a dependency of stage(s) 'report', 'score')"]
