"""A package upgrade reruns the pipeline and makes an older gate stale (data/environment.json).

DVC hashes files, not installed packages: before the ``environment`` stage, ``pip install -U opacus``
left ``dvc repro`` with nothing to do and ``privaudit verdict`` reading a gate the old accountant
computed. Now every computing stage depends on the manifest of Python's and the result packages'
versions, and the verdict's provenance check compares it with the running interpreter.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from privaudit.artifacts import write_json
from privaudit.repro.environment import ENVIRONMENT_FILE, RESULT_PACKAGES, environment_changes, environment_manifest
from privaudit.repro.provenance import environment_drift, provenance_drift, provenance_stamp

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _deps(stage: str) -> list[str]:
    return [d if isinstance(d, str) else next(iter(d)) for d in STAGES[stage].get("deps", [])]


def test_every_computing_stage_depends_on_the_environment() -> None:
    assert STAGES["environment"]["always_changed"] is True
    assert [next(iter(o)) if isinstance(o, dict) else o for o in STAGES["environment"]["outs"]] == [ENVIRONMENT_FILE]
    missing = sorted(s for s in STAGES if s not in ("environment", "user_code") and ENVIRONMENT_FILE not in _deps(s))
    assert not missing, f"stages {missing} do not list {ENVIRONMENT_FILE}: a package upgrade would not rerun them"


def test_the_stage_writes_the_same_bytes_twice_and_imports_no_torch(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    code = ("import sys; from stages.environment import main; rc = main(['--out', sys.argv[1]]); "
            "print('torch' in sys.modules, rc)")
    first = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert first.stdout.strip().endswith("False 0"), first.stdout + first.stderr
    data = out.read_bytes()
    subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.read_bytes() == data
    manifest = json.loads(data)
    assert set(manifest["packages"]) == set(RESULT_PACKAGES) and manifest["packages"]["torch"]
    assert manifest == environment_manifest()


def test_changes_name_the_package_and_both_versions() -> None:
    old = {"python": "3.11.7", "packages": {"opacus": "1.6.0", "torch": "2.13.0+cpu", "skops": None}}
    new = {"python": "3.11.9", "packages": {"opacus": "1.6.0", "torch": "2.13.0+cu121", "skops": "0.10"}}
    assert environment_changes(old, new) == ["python 3.11.7 → 3.11.9", "skops not installed → 0.10",
                                             "torch 2.13.0+cpu → 2.13.0+cu121"]
    assert environment_changes(new, new) == []


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A finished two-stage pipeline whose environment stage ran in this interpreter."""
    gate = b'{"passed": true}\n'
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "environment": {"cmd": "python -m stages.environment", "always_changed": True, "outs": [ENVIRONMENT_FILE]},
        "report": {"cmd": "python -m stages.report", "deps": [ENVIRONMENT_FILE],
                   "metrics": [{"metrics/gate.json": {"cache": False}}]}}}))
    write_json(tmp_path / ENVIRONMENT_FILE, environment_manifest())
    env_md5 = hashlib.md5((tmp_path / ENVIRONMENT_FILE).read_bytes()).hexdigest()
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        "environment": {"cmd": "x", "outs": [{"path": ENVIRONMENT_FILE, "hash": "md5", "md5": env_md5}]},
        "report": {"cmd": "x", "deps": [{"path": ENVIRONMENT_FILE, "hash": "md5", "md5": env_md5}],
                   "outs": [{"path": "metrics/gate.json", "hash": "md5", "md5": hashlib.md5(gate).hexdigest()}]}}},
        sort_keys=False))
    (tmp_path / "params.yaml").write_text("gate: {}\n")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "gate.json").write_bytes(gate)
    return tmp_path


def test_a_gate_computed_under_other_versions_is_stale(repo: Path) -> None:
    stamp = json.loads(json.dumps(provenance_stamp(repo, "report")))
    assert provenance_drift(stamp, repo) == []
    ran_with = environment_manifest()
    ran_with["packages"]["opacus"] = "0.0.1"  # the pipeline ran before `pip install -U opacus`
    write_json(repo / ENVIRONMENT_FILE, ran_with)
    now = environment_manifest()["packages"]["opacus"]
    assert environment_drift(repo, ["environment", "report"]) == [
        f"opacus 0.0.1 → {now} since the pipeline ran ({ENVIRONMENT_FILE})"]
    assert any(line.startswith("opacus 0.0.1 →") for line in provenance_drift(stamp, repo))
    # a pipeline without the environment stage (an older dvc.yaml) cannot prove its versions: fail closed
    assert environment_drift(repo, ["report"]) == [
        f"no stage of the gate's pipeline records {ENVIRONMENT_FILE} in dvc.lock, so the package versions it was "
        f"computed with cannot be proved; add the environment stage of privaudit's dvc.yaml and run `dvc repro`"]


@pytest.mark.parametrize("damage, finding", [
    ("delete", "data/environment.json is missing (the 'environment' stage did not finish"),
    ("truncate", "data/environment.json cannot be read"),
    ("schema", "data/environment.json is not an environment record"),
])
def test_a_missing_or_unreadable_environment_record_is_never_fresh(repo: Path, damage: str, finding: str) -> None:
    """Fail closed: no record, no proof (a failed environment stage deletes its output before it runs)."""
    stamp = json.loads(json.dumps(provenance_stamp(repo, "report")))
    assert provenance_drift(stamp, repo) == []
    path = repo / ENVIRONMENT_FILE
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:10])
    else:
        write_json(path, {"packages": ["numpy"]})
    assert any(line.startswith(finding) for line in environment_drift(repo, ["environment", "report"]))
    assert any(line.startswith(finding) for line in provenance_drift(stamp, repo))
