"""``privaudit release <defender>``: appends after a fresh PASS with a DP claim; every refusal names why.

Exit codes: 0 recorded; 1 refused by the verdict (FAIL, NOT AUDITED, no DP claim); 2 not checkable (gate
missing or stale, audit files uncommitted, no git work tree, unknown defender, identity other than the budget's).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from privaudit.artifacts import file_digest, write_json
from privaudit.claims.ledger import read_ledger
from privaudit.cli import main
from privaudit.config import GateParams, TotalBudget
from privaudit.repro.environment import environment_manifest
from privaudit.repro.provenance import provenance_stamp
from privaudit.verdict.gate import evaluate_gate
from privaudit.verdict.total_budget import LedgerContext
from tests.lockfiles import write_consistent_lock
from tests.report import synthetic

ROOT = Path(__file__).resolve().parents[2]

#: the pipeline's shape around the gate: the metrics the report reads, the ledger as its dependency
DVC_YAML = """stages:
  environment:
    cmd: python -m stages.environment
    always_changed: true
    outs: [data/environment.json]
  ltu:
    cmd: python -m stages.ltu
    deps: [stages/ltu.py, data/environment.json]
    params: [ltu.rounds]
    metrics: [metrics/ltu.json, metrics/audit.json]
  report:
    cmd: python -m stages.report
    deps: [stages/report.py, metrics/ltu.json, metrics/audit.json, releases.yaml]
    params: [gate.min_privacy]
    metrics: [metrics/gate.json]
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


def make_repo(root: Path, metrics: dict[str, Any] | None = None, commit: bool = True, ledger: LedgerContext | None = None,
              **gate_params: Any) -> Path:
    """A finished, committed pipeline at ``root`` whose fresh gate judged ``metrics`` at ``gate_params``."""
    metrics = metrics if metrics is not None else synthetic.metrics()
    min_privacy = gate_params.get("min_privacy", 0.2)
    (root / "metrics").mkdir(parents=True, exist_ok=True)
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "params.yaml").write_text(f"ltu:\n  rounds: 100\ngate:\n  min_privacy: {min_privacy}\n")
    (root / "metrics" / "ltu.json").write_text(json.dumps(metrics["ltu"]))
    (root / "metrics" / "audit.json").write_text(json.dumps(metrics["audit"]))
    shutil.copy(ROOT / "releases.yaml", root / "releases.yaml")
    write_json(root / "data" / "environment.json", environment_manifest())
    write_json(root / "data" / "source" / "meta.json", {"name": "digits", "identity": "digits", "digest": "ab" * 32})
    write_consistent_lock(root)
    result = evaluate_gate(synthetic.typed(metrics), GateParams(**gate_params), ledger)
    write_json(root / "metrics" / "gate.json", {**result.to_json(), "provenance": provenance_stamp(root, "report")})
    if commit:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "audit")
    return root


def release(repo: Path, *args: str) -> int:
    return main(["release", *args, "--repo", str(repo)])


def test_a_fresh_pass_with_a_claim_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, min_privacy=0.0)
    assert release(repo, "dp_sgd") == 0
    assert "recorded 'dp_sgd-" in capsys.readouterr().out
    (entry,) = read_ledger(repo / "releases.yaml").releases
    head = git(repo, "rev-parse", "HEAD")
    assert entry.name == f"dp_sgd-{head[:12]}" and entry.defender == "dp_sgd"
    assert entry.audit.commit == head and entry.audit.gate_hash == file_digest(repo / "metrics" / "gate.json")
    assert (entry.dataset.identity, entry.dataset.digest) == ("digits", "ab" * 32)
    assert (entry.claim.epsilon, entry.claim.delta, entry.claim.neighbourhood.value) == (1.0, 0.0, "add_remove")


def test_name_and_identity_can_be_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--identity`` checks the identity the audit ran with; another one is refused (a release recorded under an
    identity the gate does not compose — a typo, ``patiens`` — was silently left out of every later budget)."""
    repo = make_repo(tmp_path, min_privacy=0.0)
    assert release(repo, "dp_sgd", "--name", "model-2026-05", "--identity", "patients") == 2
    err = capsys.readouterr().err
    assert "--identity 'patients' is not the data set identity this audit ran with ('digits'" in err
    assert "set dataset.identity: 'patients' in params.yaml" in err
    assert read_ledger(repo / "releases.yaml").releases == ()
    assert release(repo, "dp_sgd", "--name", "model-2026-05", "--identity", "digits") == 0
    (entry,) = read_ledger(repo / "releases.yaml").releases
    assert entry.name == "model-2026-05" and entry.dataset.identity == "digits"


def test_the_same_model_is_not_released_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Release, commit the ledger, recompute the gate (it composes the release: another gate hash), release the
    same trained model again: refused by the model file's sha256 (the gate-hash guard alone never fired, and the
    model was charged to the budget twice)."""
    model = tmp_path / "data" / "defenders" / "dp_sgd" / "model.safetensors"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"the released weights")
    repo = make_repo(tmp_path, min_privacy=0.0)
    assert release(repo, "dp_sgd") == 0
    (first,) = read_ledger(repo / "releases.yaml").releases
    assert first.audit.model_sha256 == file_digest(model)
    git(repo, "add", "releases.yaml")
    git(repo, "commit", "-qm", "release")
    gate = json.loads((repo / "metrics" / "gate.json").read_text())
    (repo / "metrics" / "gate.json").unlink()  # the next `dvc repro`: the report stage reran on the new ledger
    write_consistent_lock(repo)
    gate["provenance"] = provenance_stamp(repo, "report")
    write_json(repo / "metrics" / "gate.json", {**gate, "warnings": ["composed 1 release"]})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "audit after the release")
    capsys.readouterr()
    assert release(repo, "dp_sgd", "--name", "again") == 2
    err = capsys.readouterr().err
    assert "this model of 'dp_sgd' (" in err and "is already released as 'dp_sgd-" in err, err
    assert len(read_ledger(repo / "releases.yaml").releases) == 1
    model.write_bytes(b"retrained weights")  # a new model (retrained): released
    (repo / "metrics" / "gate.json").unlink()
    write_consistent_lock(repo)
    gate["provenance"] = provenance_stamp(repo, "report")
    write_json(repo / "metrics" / "gate.json", gate)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "retrained")
    assert release(repo, "dp_sgd", "--name", "retrained") == 0, capsys.readouterr().err


def test_the_next_release_needs_a_gate_that_composed_the_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, min_privacy=0.0)
    assert release(repo, "dp_sgd") == 0
    capsys.readouterr()
    assert release(repo, "dp_sgd", "--name", "again") == 2
    err = capsys.readouterr().err
    assert "stale" in err and "releases.yaml changed since the gate" in err and "dvc repro" in err
    assert err.count("releases.yaml changed") == 1  # said once, not by two checks
    assert len(read_ledger(repo / "releases.yaml").releases) == 1


@pytest.mark.parametrize(("defender", "edit", "params", "words"), [
    ("logreg", None, {}, "FAILED the release gate: logreg: LTU privacy"),
    ("logreg", None, {"min_privacy": 0.0}, "makes no DP claim"),
    ("dp_sgd", lambda m: (m["audit"]["dp_sgd"].pop("game3"), m["audit"]["dp_sgd"].pop("lidp")), {"min_privacy": 0.0},
     "is NOT AUDITED"),
])
def test_the_verdict_refuses_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str], defender: str, edit: Any,
                                          params: dict[str, Any], words: str) -> None:
    metrics = synthetic.metrics()
    if edit is not None:
        edit(metrics)
    repo = make_repo(tmp_path, metrics, **params)
    before = (repo / "releases.yaml").read_bytes()
    assert release(repo, defender) == 1
    assert words in capsys.readouterr().err
    assert (repo / "releases.yaml").read_bytes() == before


def test_a_stale_gate_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, min_privacy=0.0)
    (repo / "params.yaml").write_text("ltu:\n  rounds: 100\ngate:\n  min_privacy: 0.1\n")
    git(repo, "commit", "-qam", "edit params")
    assert release(repo, "dp_sgd") == 2
    err = capsys.readouterr().err
    assert "stale" in err and "gate.min_privacy" in err and "--no-check" not in err


def test_uncommitted_audit_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, min_privacy=0.0)
    (repo / "metrics" / "notes.json").write_text("{}")  # the gate stays fresh; the audit is not committed
    assert release(repo, "dp_sgd") == 2
    err = capsys.readouterr().err
    assert "the audit files are not committed (metrics/notes.json)" in err and "git commit" in err
    assert read_ledger(repo / "releases.yaml").releases == ()


def test_outside_git_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, commit=False, min_privacy=0.0)
    assert release(repo, "dp_sgd") == 2
    assert "not a git work tree" in capsys.readouterr().err


def test_unknown_defender_and_missing_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, min_privacy=0.0)
    assert release(repo, "nobody") == 2
    assert "defender 'nobody' is not in the gate (it judged ['dp_sgd', 'logreg'])" in capsys.readouterr().err
    assert release(tmp_path / "elsewhere", "dp_sgd") == 2
    assert "does not exist; run the report stage first" in capsys.readouterr().err


def test_an_identity_other_than_the_budgets_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = LedgerContext(TotalBudget(epsilon=5.0, delta=1e-5), "digits", ())
    metrics = synthetic.metrics()
    metrics["audit"]["logreg"]["claimed_epsilon"] = 5.0  # (logreg is not released here)
    repo = make_repo(tmp_path, metrics, ledger=ctx, min_privacy=0.0)
    assert release(repo, "dp_sgd", "--identity", "patients") == 2
    assert "is not the data set identity this audit ran with ('digits'" in capsys.readouterr().err
    write_json(repo / "data" / "source" / "meta.json", {"name": "digits", "identity": "patients", "digest": "ab" * 32})
    assert release(repo, "dp_sgd") == 2  # the data's identity moved since the gate checked its budget
    assert "checked gate.total_budget for data set identity 'digits', not 'patients'" in capsys.readouterr().err
    write_json(repo / "data" / "source" / "meta.json", {"name": "digits", "identity": "digits", "digest": "ab" * 32})
    assert release(repo, "dp_sgd") == 0


def test_the_guide_commands_run_as_a_program(tmp_path: Path) -> None:
    """docs/howto/release-ledger.md: ``privaudit release <defender>`` in the repository, then the commit of the
    ledger; the module runs as a program and its exit status says what happened."""
    import os
    import sys

    repo = make_repo(tmp_path, min_privacy=0.0)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    proc = subprocess.run([sys.executable, "-m", "privaudit.cli", "release", "dp_sgd"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    subprocess.run('git add releases.yaml && git commit -m "release dpsgd_eps1"', shell=True, cwd=repo, env=env,
                   check=True, capture_output=True)
    assert git(repo, "status", "--porcelain") == "" and len(read_ledger(repo / "releases.yaml").releases) == 1
    again = subprocess.run([sys.executable, "-m", "privaudit.cli", "release", "logreg"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 2 and "stale" in again.stderr  # the gate has not composed the release yet
