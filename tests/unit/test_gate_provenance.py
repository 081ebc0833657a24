"""The gate's provenance block: stable after a successful run, refused after any upstream change (issue 15, item 3)."""

from __future__ import annotations

import hashlib
import shutil
import json
from pathlib import Path

import pytest
import yaml

from privaudit.repro.provenance import lock_drift, provenance_drift, provenance_stamp, upstream_stages
from tests.lockfiles import consistent_lock, write_consistent_lock

DVC_YAML = """
stages:
  user_code:
    cmd: python -m stages.user_code
    always_changed: true
    outs: [data/user_code.json]
  environment:
    cmd: python -m stages.environment
    always_changed: true
    outs: [data/environment.json]
  prep:
    cmd: python prep.py
    deps: [stages/prep.py, data/external, data/environment.json]
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


#: the gate the report stage wrote
GATE = b'{"passed": true}\n'


def _lock(repo: Path) -> dict:
    """dvc.lock after a successful run on the files in ``repo`` (real DVC md5s)."""
    return consistent_lock(repo)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A finished pipeline: dvc.yaml, params, every stage's outputs on disk, a consistent dvc.lock."""
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / ".dvcignore").write_text("__pycache__\n*.pyc\n")
    (tmp_path / "params.yaml").write_text("# comments do not count\n" + yaml.safe_dump(PARAMS))
    (tmp_path / "extra.yaml").write_text("title: t\n")
    (tmp_path / "data" / "prep").mkdir(parents=True)
    (tmp_path / "data" / "prep" / "p.npz").write_bytes(b"prepared")
    (tmp_path / "data" / "other").mkdir(parents=True)
    (tmp_path / "data" / "other" / "o.txt").write_bytes(b"other")
    (tmp_path / "data" / "scores").mkdir(parents=True)
    (tmp_path / "data" / "scores" / "a.parquet").write_bytes(b"scores")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "score.json").write_text('{"s": 1}\n')
    (tmp_path / "metrics" / "gate.json").write_bytes(GATE)
    (tmp_path / "trainer.py").write_text("def train(*a):\n    pass\n")
    from privaudit.artifacts import write_json
    from privaudit.repro.environment import environment_manifest
    from privaudit.repro.user_code import user_code_manifest

    write_json(tmp_path / "data" / "user_code.json", user_code_manifest(PARAMS, tmp_path))
    write_json(tmp_path / "data" / "environment.json", environment_manifest())
    write_consistent_lock(tmp_path)
    return tmp_path


def _stamp(repo: Path) -> dict:
    return json.loads(json.dumps(provenance_stamp(repo, "report")))  # as read back from gate.json


def test_stamp_lists_the_data_inputs_params_and_upstream(repo: Path) -> None:
    stamp = _stamp(repo)
    assert [p for p, _ in stamp["inputs"]] == ["data/scores", "metrics/score.json"]  # no code deps
    assert stamp["params"] == [["extra.yaml", "title"], ["params.yaml", "gate.min"]]
    assert stamp["pipeline"] == ["environment", "prep", "report", "score", "user_code"]  # not 'unrelated'
    assert upstream_stages(yaml.safe_load(DVC_YAML)["stages"], "score") == ["environment", "prep", "score", "user_code"]
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
    (repo / "dvc.lock").write_text(yaml.safe_dump(_lock(repo), sort_keys=True))  # re-serialised lock
    assert provenance_drift(stamp, repo) == []


def test_changed_input_is_named(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "data" / "scores" / "a.parquet").write_bytes(b"other scores")
    assert provenance_drift(stamp, repo) == ["data/scores changed since the gate was computed",
                                             "data/scores is not the version dvc.lock records for stage 'score'"]
    (repo / "metrics" / "score.json").unlink()
    assert [p for p in provenance_drift(stamp, repo) if p.startswith("metrics/score.json")] == [
        "metrics/score.json is missing (an output of stage 'score' in dvc.lock)"]  # said once, with the detail


def test_changed_gate_param_is_named(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "extra.yaml").write_text("title: new\n")
    problems = provenance_drift(stamp, repo)
    # named once, with its values (walkthrough: a line listing every key the gate reads read as if all changed)
    assert [p for p in problems if "title" in p] == ["extra.yaml title changed (stage 'report' ran with 't', now 'new')"]
    # a lock that does not say it (its report entry lost the key): the stamp's digest still catches the change
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    lock["stages"]["report"]["params"]["extra.yaml"].pop("title")
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=True))
    problems = provenance_drift(stamp, repo)
    assert any(p.startswith("the gate's params changed since it was computed (") and "title" in p for p in problems)


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
    lock = _lock(repo)
    (repo / "data" / "prep" / "p.npz").write_bytes(b"prepared from new data")
    from privaudit.repro.provenance import dvc_md5

    lock["stages"]["prep"]["outs"][0]["md5"] = dvc_md5(repo / "data" / "prep")
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert provenance_drift(stamp, repo) == [
        "data/prep changed (written by stage 'prep'; stage 'score' has not run on it)"]


def test_stage_missing_from_the_lock(repo: Path) -> None:
    lock = _lock(repo)
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

    write_json(repo / "data" / "user_code.json", user_code_manifest(PARAMS, repo))  # the user_code stage ran ...
    assert provenance_drift(stamp, repo) == [  # ... but nothing downstream ran on the new code yet
        "data/user_code.json is not the version dvc.lock records for stage 'user_code'"]
    write_consistent_lock(repo)  # `dvc repro` reran every stage downstream of it, and the report restamped
    assert provenance_drift(_stamp(repo), repo) == []


@pytest.mark.parametrize("block", [None, {"version": 99}, {"version": 1}, {"version": 2, "params": []}])
def test_missing_or_foreign_provenance_raises(repo: Path, block: object) -> None:
    with pytest.raises(ValueError, match="no provenance block|has version (99|1),|malformed"):
        provenance_drift(block, repo)


def test_without_dvc_yaml_the_whole_params_file_counts(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("a: 1\n")
    (tmp_path / "in.json").write_text("{}")
    stamp = json.loads(json.dumps(provenance_stamp(tmp_path, inputs=["in.json"])))
    assert stamp["params"] == [["params.yaml", None]] and stamp["pipeline"] == []
    no_pipeline = ("the gate names no pipeline stage (it was not written by the 'report' stage of dvc.yaml under "
                   "`dvc repro`), so nothing upstream of it can be proved current")
    assert provenance_drift(stamp, tmp_path) == [no_pipeline]  # fails closed: nothing upstream is known
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert provenance_drift(stamp, tmp_path) == [
        no_pipeline, "the gate's params changed since it was computed (params.yaml)"]


def test_edited_helper_module_of_the_trainer_is_stale(repo: Path) -> None:
    """Issue 28 item 1: an edit one import away from the trainer makes the gate stale, naming the file."""
    (repo / "trainer.py").write_text("from mylib import lr\ndef train(*a):\n    return lr.LR\n")
    (repo / "mylib").mkdir()
    (repo / "mylib" / "__init__.py").write_text("")
    (repo / "mylib" / "lr.py").write_text("LR = 0.3\n")
    from privaudit.artifacts import write_json
    from privaudit.repro.user_code import user_code_manifest

    write_json(repo / "data" / "user_code.json", user_code_manifest(PARAMS, repo))  # the user_code stage ran
    write_consistent_lock(repo)  # and so did everything after it
    stamp = _stamp(repo)
    assert provenance_drift(stamp, repo) == []
    (repo / "mylib" / "lr.py").write_text("LR = 0.2\n")
    assert provenance_drift(stamp, repo) == ["user code of defender 'u' changed (mylib/lr.py)"]


def test_gate_or_report_not_the_one_dvc_lock_records_is_stale(repo: Path) -> None:
    """Issue 28 item 2: `git checkout <rev> -- dvc.lock metrics && dvc checkout` failing on the report
    (not in a fresh clone's cache) deleted it, and the old gate still read PASS."""
    stamp = _stamp(repo)
    lock = _lock(repo)
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
    lock = write_consistent_lock(repo)  # the pipeline ran on this code and data
    lib = dvc_md5(repo / "src" / "lib", _dvcignore(repo), repo)
    assert lib != dvc_md5(repo / "src" / "lib", None, repo)  # the .pyc is left out, as DVC leaves it out
    assert {"path": "src/lib", "hash": "md5", "md5": lib} in lock["stages"]["score"]["deps"]
    assert {"path": "data/external", "hash": "md5", "md5": dvc_md5(repo / "data" / "external", None, repo)} \
        in lock["stages"]["prep"]["deps"]
    stamp = _stamp(repo)
    assert provenance_drift(stamp, repo) == []

    (repo / "src" / "lib" / "core.py").write_text("LR = 0.2\n")
    (repo / "data" / "external" / "table.csv").write_text("a,b\n1,3\n")
    assert provenance_drift(stamp, repo) == [
        "data/external changed since the gate's pipeline ran (a dependency of stage(s) 'prep')",
        "src/lib changed since the gate's pipeline ran (a dependency of stage(s) 'report', 'score')"]


# --------------------------------------------------------------------------- fail closed (every file the checks read)

#: every file the verdict's checks read in this pipeline: dvc.lock and each output of the gate's upstream stages
READ_BY_THE_CHECKS = ("dvc.lock", "data/user_code.json", "data/environment.json", "data/prep/p.npz",
                      "data/scores/a.parquet", "metrics/score.json", "metrics/gate.json")


def _rerun_with_other_data(repo: Path) -> dict:
    """A second successful run (other prepared data, other scores, a changed trainer): every file rewritten."""
    from privaudit.artifacts import write_json
    from privaudit.repro.user_code import user_code_manifest

    (repo / "trainer.py").write_text("def train(*a):\n    return 2\n")
    write_json(repo / "data" / "user_code.json", user_code_manifest(PARAMS, repo))
    (repo / "data" / "prep" / "p.npz").write_bytes(b"prepared, second run")
    (repo / "data" / "scores" / "a.parquet").write_bytes(b"scores, second run")
    (repo / "metrics" / "score.json").write_text('{"s": 2}\n')
    (repo / "metrics" / "gate.json").write_bytes(b'{"passed": false}\n')
    write_consistent_lock(repo)
    return _stamp(repo)


@pytest.mark.parametrize("rel", READ_BY_THE_CHECKS)
@pytest.mark.parametrize("damage", ["delete", "truncate", "earlier run"])
def test_every_file_the_checks_read_fails_closed(repo: Path, tmp_path_factory: pytest.TempPathFactory,
                                                 rel: str, damage: str) -> None:
    """A file deleted (a failed stage deletes its outputs first), truncated, or swapped for an earlier run's
    version can never leave the gate fresh."""
    earlier = tmp_path_factory.mktemp("earlier")
    shutil.copytree(repo, earlier, dirs_exist_ok=True)  # the first run's files ...
    from privaudit.artifacts import write_json
    from privaudit.repro.environment import environment_manifest

    older = environment_manifest()
    older["packages"]["opacus"] = "0.0.1"  # ... made before `pip install -U opacus`
    write_json(earlier / "data" / "environment.json", older)
    stamp = _rerun_with_other_data(repo)
    assert provenance_drift(stamp, repo) == []
    path = repo / rel
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    else:
        shutil.copy2(earlier / rel, path)
    problems = provenance_drift(stamp, repo)
    assert problems, f"{damage} {rel}: the gate still reads fresh"


def test_a_file_outside_the_gates_pipeline_does_not_make_it_stale(repo: Path) -> None:
    stamp = _stamp(repo)
    (repo / "data" / "other" / "o.txt").unlink()  # an output of 'unrelated', which the gate does not read
    assert provenance_drift(stamp, repo) == []


@pytest.mark.parametrize("content, finding", [
    (None, "data/user_code.json is missing (the 'user_code' stage did not finish"),
    (b'{"u": {"target": "trainer.py:tr', "data/user_code.json cannot be read"),
    (b'["trainer.py"]\n', "data/user_code.json is not a user-code manifest (it holds a list"),
    (b'{"u": {"sha256": 1}}\n', "data/user_code.json is not a user-code manifest (its entry 'u'"),
])
def test_the_newcomers_sequence_fails_closed(repo: Path, content: bytes | None, finding: str) -> None:
    """A typo in params.yaml makes the user_code stage fail, and DVC deletes its output first; the typo is
    fixed, the trainer edited, nothing rerun: `privaudit verdict` once said PASS here."""
    stamp = _stamp(repo)
    path = repo / "data" / "user_code.json"
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    (repo / "trainer.py").write_text("def train(*a):\n    return 'noise / 10'\n")
    problems = provenance_drift(stamp, repo)
    assert any(p.startswith(finding) for p in problems), problems
    from privaudit.repro.provenance import user_code_drift

    assert any(p.startswith(finding) for p in user_code_drift(repo, stamp["pipeline"]))


def test_python_defenders_without_a_user_code_stage_cannot_be_proved(repo: Path) -> None:
    from privaudit.repro.provenance import user_code_drift

    assert user_code_drift(repo, ["score", "report"]) == [
        "no stage of the gate's pipeline records data/user_code.json in dvc.lock, so the kind: python trainers "
        "params.yaml names cannot be proved unchanged; add the user_code stage of privaudit's dvc.yaml and run "
        "`dvc repro`"]


def test_an_input_missing_when_the_gate_was_stamped_is_never_fresh(repo: Path) -> None:
    (repo / "metrics" / "score.json").unlink()
    stamp = _stamp(repo)
    assert "metrics/score.json was missing when the gate was computed" in provenance_drift(stamp, repo)


def test_a_rerun_whose_outputs_did_not_change_leaves_the_gate_fresh(repo: Path) -> None:
    """`dvc repro` after a new file in data/external reruns ingest (prep here), whose output is byte-identical, so
    nothing downstream reruns and the report keeps its gate: that must read fresh (a refusal `dvc repro` cannot
    clear would be a false alarm). Found by the real-pipeline test: the stamp once hashed whole lock entries."""
    (repo / "data" / "external").mkdir(parents=True)
    (repo / "data" / "external" / "a.csv").write_text("a\n1\n")
    write_consistent_lock(repo)
    stamp = _stamp(repo)
    assert provenance_drift(stamp, repo) == []
    (repo / "data" / "external" / "notes.csv").write_text("not read by prep\n")
    assert provenance_drift(stamp, repo) == [
        "data/external changed since the gate's pipeline ran (a dependency of stage(s) 'prep')"]
    write_consistent_lock(repo)  # prep reran (its dep moved), its output is the same: nothing else reran
    assert provenance_drift(stamp, repo) == []


def test_a_changed_defenders_list_is_described_by_name_once_for_all_stages(tmp_path: Path) -> None:
    """Adding a defender: one line naming it, with every stage that ran without it — not the whole list twice per
    stage (the walkthrough's message was cut off after 1000 characters without saying 'mine' was added)."""
    from privaudit.repro.provenance import lock_drift

    before = [{"name": "logreg", "kind": "sklearn", "C": 1.0}, {"name": "mlp", "kind": "torch_mlp", "epochs": 30}]
    after = [before[0], {**before[1], "epochs": 5}, {"name": "mine", "kind": "python", "target": "t.py:train"}]
    stages = {s: {"cmd": s, "params": {"params.yaml": {"defenders": before}}} for s in ("defenders", "ltu", "audit")}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"defenders": after}))
    assert lock_drift(tmp_path, ["defenders", "ltu", "audit"]) == [
        "params.yaml defenders changed (stages 'defenders', 'ltu', 'audit' ran with 'mlp' epochs=30, "
        "now 'mlp' epochs=5, 'mine' added)"]


@pytest.mark.parametrize(("old", "new", "described"), [
    (100, 500, ("100", "500")),
    ([{"name": "a", "k": 1}], [{"name": "b", "k": 1}], ("'a'", "'b' added, 'a' removed")),
    ([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"name": "a"}], ("entries 'a', 'b'", "reordered 'b', 'a'")),
    ([{"name": "a"}], [{"name": "a"}, {"name": "z"}], ("without 'z'", "'z' added")),
    ([{"name": "a", "x": 1}], [{"name": "a"}], ("'a' x=1", "'a' x=unset")),
    ("x" * 500, "y", ("'" + "x" * 79 + "… (422 more characters)", "'y'")),
])
def test_describe_change_is_short_and_names_what_differs(old: object, new: object,
                                                         described: tuple[str, str]) -> None:
    from privaudit.repro.provenance import describe_change

    assert describe_change(old, new) == described


def test_a_missing_file_is_said_missing_once_with_the_most_detail() -> None:
    from privaudit.repro.provenance import _missing_once

    lines = ["metrics/audit.json is missing", "params.yaml a changed (stage 'x' ran with 1, now 2)",
             "data/user_code.json is missing (the 'user_code' stage did not finish since the gate's pipeline ran)",
             "metrics/audit.json is missing (an output of stage 'audit' in dvc.lock)",
             "data/user_code.json is missing (an output of stage 'user_code' in dvc.lock)"]
    assert _missing_once(lines) == [
        "params.yaml a changed (stage 'x' ran with 1, now 2)",
        "data/user_code.json is missing (the 'user_code' stage did not finish since the gate's pipeline ran)",
        "metrics/audit.json is missing (an output of stage 'audit' in dvc.lock)"]


def test_a_changed_file_is_said_changed_once() -> None:
    from privaudit.repro.provenance import _missing_once

    lines = ["releases.yaml changed since the gate was computed",
             "releases.yaml changed since the gate's pipeline ran (a dependency of stage(s) report)",
             "data/x changed since the gate was computed"]
    assert _missing_once(lines) == [
        "releases.yaml changed since the gate's pipeline ran (a dependency of stage(s) report)",
        "data/x changed since the gate was computed"]
