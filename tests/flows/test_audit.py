"""The audit flow: typed overrides, a real micro pipeline run with its artifacts, the failure paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.client.orchestration import get_client

import flows.audit as audit
from flows._dvc import DVC_CONCURRENCY_LIMIT, LOCK_FILE, PipelineError, file_lock, set_overrides_args, yaml_scalar
from flows.audit import AuditOverrides, GateFailed, audit_flow
from privaudit.verdict.metrics_files import AuditMetrics, GateResult, parse_entries
from tests.flows.helpers import artifacts_of, task_runs_named

pytestmark = pytest.mark.usefixtures("prefect_harness")


# ----------------------------------------------------------------------------- overrides (no server needed)


def test_overrides_map_to_dvc_set_arguments() -> None:
    o = AuditOverrides(ltu_rounds=500, dataset_label_column="y", gate_min_privacy=0.5,
                       extra={"gate.beta": 0.01, "report.title": "nightly run", "dataset.path": None})
    assert o.as_dotted() == {"ltu.rounds": 500, "dataset.label_column": "y", "gate.min_privacy": 0.5,
                             "gate.beta": 0.01, "report.title": "nightly run", "dataset.path": None}
    assert set_overrides_args(o.as_dotted()) == [
        "-S", "dataset.label_column=y", "-S", "dataset.path=null", "-S", "gate.beta=0.01",
        "-S", "gate.min_privacy=0.5", "-S", "ltu.rounds=500", "-S", "report.title=nightly run"]
    assert AuditOverrides().as_dotted() == {}
    assert [yaml_scalar(v) for v in (True, None, 3, 1e-5, "auto")] == ["true", "null", "3", "1.0e-05", "auto"]


@pytest.mark.parametrize("key", ["rounds", "nosuchblock.x", "ltu"])
def test_override_keys_must_name_a_params_block(key: str) -> None:
    with pytest.raises(ValueError, match="must be '<block>.<key>'"):
        AuditOverrides(extra={key: 1}).as_dotted()


def test_overrides_reject_unknown_fields() -> None:
    with pytest.raises(ValueError, match="ltu_round"):
        AuditOverrides(ltu_round=5)  # type: ignore[call-arg]


# ----------------------------------------------------------------------------- a real micro pipeline


@pytest.fixture()
def first_run(first_audit: Any) -> Any:
    """One real ``dvc repro`` of the micro pipeline through the flow (the end-to-end run; conftest)."""
    return first_audit


def test_audit_flow_runs_pipeline_and_publishes_artifacts(micro_workspace: Path, first_run: Any) -> None:
    ws = micro_workspace
    gate = json.loads((ws / "metrics" / "gate.json").read_text())
    audit_json = json.loads((ws / "metrics" / "audit.json").read_text())
    ltu = json.loads((ws / "metrics" / "ltu.json").read_text())
    assert first_run.is_completed() == gate["passed"], first_run.message
    if not gate["passed"]:
        assert first_run.is_failed() and first_run.message.startswith("release gate failed")

    arts = artifacts_of(first_run.state_details.flow_run_id)
    assert {"privaudit-verdict", "privaudit-defenders", "privaudit-report"} <= set(arts)
    md = arts["privaudit-verdict"].data
    assert f"privaudit verdict: **{'PASS' if gate['passed'] else 'FAIL'}**" in md
    table = json.loads(arts["privaudit-defenders"].data)
    assert [row["defender"] for row in table] == list(gate["defenders"]) == ["logreg"]
    row = table[0]
    entry = parse_entries("audit", audit_json)["logreg"]
    gated = set(entry.budget.gated) if entry.budget is not None else None
    eps = [e for kind, _, _, e in entry.epsilon_lower_bounds() if gated is None or kind in gated]
    assert entry.claim is None and row["gate"] in ("PASS (no DP claim)", "FAIL")  # the verdict's own words
    assert row["epsilon_hat"] == pytest.approx(max(eps))  # no claim: the largest gated bound
    assert row["privacy"] == pytest.approx(ltu["logreg"]["privacy"])
    assert f"{row['privacy']:.3f}" in md and f"{row['epsilon_hat']:.3f} ({row['epsilon_hat_audit']})" in md
    report = ws / "reports" / "audit.html"
    assert report.is_file() and report.resolve().as_uri() in arts["privaudit-report"].data

    # the pipeline ran once, with no retry, and its log names the stages
    [pipeline_run] = task_runs_named(first_run.state_details.flow_run_id, "dvc-pipeline")
    assert pipeline_run.run_count == 1

    # the history stage recorded the run with the flow as its trigger (PRIVAUDIT_TRIGGER, flows._dvc.flow_trigger)
    from privaudit.history.store import HistoryStore

    [record] = [r for r in HistoryStore(ws).read() if r.trigger.startswith("prefect flow privaudit-audit (flow run ")]
    assert record.passed == gate["passed"] and list(record.defenders) == ["logreg"]


@pytest.mark.slow  # a second flow run after the real end-to-end run
def test_second_run_reproduces_nothing(micro_workspace: Path, first_run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs: list[str] = []
    real = audit.run_dvc

    def spy(repo: Path, args: list[str], timeout_s: float | None = None, on_line: Any = None) -> str:
        outputs.append(out := real(repo, args, timeout_s, on_line))
        return out

    monkeypatch.setattr(audit, "run_dvc", spy)
    state = audit_flow(repo=str(micro_workspace), return_state=True)
    assert state.type == first_run.type
    assert len(outputs) == 1
    ran = [line for line in outputs[0].splitlines() if line.startswith("Running stage")]
    # user_code, environment and history are always_changed, and alone
    assert sorted(ran) in ([], ["Running stage 'environment':", "Running stage 'history':",
                                "Running stage 'user_code':"]), outputs[0]


@pytest.mark.slow  # a real `dvc exp run` (report stage only) after the real end-to-end run
def test_real_failed_gate_fails_the_flow_with_its_reasons(micro_workspace: Path, first_run: Any) -> None:
    """``gate.min_privacy=1.0`` via ``dvc exp run -S``: only the report stage reruns; the run ends Failed."""
    params_file = micro_workspace / "params.yaml"
    original = params_file.read_bytes()
    try:
        state = audit_flow(repo=str(micro_workspace), overrides=AuditOverrides(gate_min_privacy=1.0), return_state=True)
        gate = json.loads((micro_workspace / "metrics" / "gate.json").read_text())
        assert params_file.read_bytes() == original  # the override applied to that run only
    finally:
        params_file.write_bytes(original)
    assert gate["passed"] is False and gate["reasons"]
    assert state.is_failed()
    assert state.message.startswith("release gate failed: ")
    for reason in gate["reasons"]:
        assert reason in state.message
    assert "privacy" in state.message
    md = artifacts_of(state.state_details.flow_run_id)["privaudit-verdict"].data
    assert "**FAIL**" in md and all(r in md for r in gate["reasons"])


# ----------------------------------------------------------------------------- failure paths with a fake dvc


FAILED_GATE = {
    "passed": False,
    "reasons": ["mlp: LTU privacy 0.10 < gate.min_privacy 0.20", "mlp: audited eps 3.1 > claimed 1.0"],
    "defenders": {"logreg": {"passed": True, "reasons": []},
                  "mlp": {"passed": False, "reasons": ["mlp: LTU privacy 0.10 < gate.min_privacy 0.20",
                                                       "mlp: audited eps 3.1 > claimed 1.0"]}},
}


def test_failed_gate_fails_the_flow_with_its_reasons(micro_workspace: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake ``dvc repro`` writes a failing gate: the run ends Failed, every reason in its message."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "dvc.yaml").write_text("stages: {}\n")
    (repo / "params.yaml").write_text((micro_workspace / "params.yaml").read_text())

    def fake_repro(root: Path, args: list[str], timeout_s: float | None = None, on_line: Any = None) -> str:
        (root / "metrics").mkdir()
        (root / "metrics" / "gate.json").write_text(json.dumps(FAILED_GATE))
        (root / "metrics" / "ltu.json").write_text(json.dumps({"mlp": {"privacy": 0.1, "privacy_stderr": 0.02}}))
        (root / "metrics" / "audit.json").write_text(json.dumps(
            {"mlp": {"claimed_epsilon": 1.0, "game3": {"eps_low": 3.1}, "lidp": {"eps_lower_bound": 2.0}}}))
        return "Running stage 'report':\n"

    monkeypatch.setattr(audit, "run_dvc", fake_repro)
    state = audit_flow(repo=str(repo), return_state=True)
    assert state.is_failed()
    assert state.message == "release gate failed: " + "; ".join(FAILED_GATE["reasons"])
    with pytest.raises(GateFailed, match="release gate failed") as raised:
        state.result()
    assert raised.value.summary["passed"] is False and raised.value.summary["reasons"] == FAILED_GATE["reasons"]
    arts = artifacts_of(state.state_details.flow_run_id)
    md = arts["privaudit-verdict"].data
    assert "**FAIL**" in md and all(r in md for r in FAILED_GATE["reasons"])
    rows = {r["defender"]: r for r in json.loads(arts["privaudit-defenders"].data)}
    assert rows["mlp"]["gate"] == "FAIL" and rows["mlp"]["epsilon_hat"] == 3.1 and rows["mlp"]["privacy"] == 0.1
    assert rows["mlp"]["epsilon_hat_audit"] == "Game 3"
    assert rows["logreg"]["gate"] == "PASS (no DP claim)" and rows["logreg"]["epsilon_hat"] is None



def test_pipeline_error_fails_the_run_without_retrying(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def broken(repo: Path, args: list[str], timeout_s: float | None = None, on_line: Any = None) -> str:
        calls.append(args)
        raise PipelineError("`dvc repro` failed (exit 255):\nERROR: failed to reproduce 'ltu'")

    monkeypatch.setattr(audit, "run_dvc", broken)
    state = audit_flow(repo=str(micro_workspace), return_state=True)
    assert state.is_failed() and "failed to reproduce 'ltu'" in state.message
    assert calls == [["repro"]]  # exactly one attempt: the pipeline task has no retries
    assert audit.run_pipeline.retries == 0
    assert audit.read_gate.retries > 0 and audit.publish_artifacts.retries > 0  # I/O tasks do retry


def test_bad_override_stops_before_the_pipeline(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "run_dvc", lambda *a, **k: pytest.fail("dvc must not run with invalid params"))
    state = audit_flow(repo=str(micro_workspace), overrides=AuditOverrides(ltu_rounds=0), return_state=True)
    assert state.is_failed() and "ltu.rounds" in state.message


def test_force_and_overrides_reach_dvc(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(audit, "run_dvc", lambda repo, args, timeout_s=None, on_line=None: calls.append(args) or "")
    monkeypatch.setattr(audit, "read_gate", lambda repo: GateResult(passed=True, reasons=(), defenders={}))
    assert audit_flow(repo=str(micro_workspace), force=True, return_state=True).is_completed()
    audit_flow(repo=str(micro_workspace), overrides={"lidp_trials": 8}, return_state=True)
    assert calls == [["repro", "--force"], ["exp", "run", "-S", "lidp.trials=8"]]


@pytest.mark.parametrize("fails", [False, True])
def test_override_run_restores_params_yaml(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    """`dvc exp run -S` writes the overrides into params.yaml; the flow puts the file back, even on failure."""
    params_file = micro_workspace / "params.yaml"
    original = params_file.read_bytes()
    seen: list[int] = []

    def exp_run(repo: Path, args: list[str], timeout_s: float | None = None, on_line: Any = None) -> str:
        raw = yaml.safe_load(params_file.read_text())
        raw["lidp"]["trials"] = 8
        params_file.write_text(yaml.safe_dump(raw))  # as dvc exp run -S lidp.trials=8 leaves it
        seen.append(raw["lidp"]["trials"])
        if fails:
            raise PipelineError("`dvc exp run` failed (exit 255):\nERROR: failed to reproduce 'ltu'")
        return ""

    monkeypatch.setattr(audit, "run_dvc", exp_run)
    monkeypatch.setattr(audit, "read_gate", lambda repo: GateResult(passed=True, reasons=(), defenders={}))
    monkeypatch.setattr(audit, "read_metrics", lambda repo: AuditMetrics())
    try:
        state = audit_flow(repo=str(micro_workspace), overrides=AuditOverrides(lidp_trials=8), return_state=True)
        assert seen == [8] and state.is_failed() == fails
        assert params_file.read_bytes() == original
    finally:
        params_file.write_bytes(original)


def test_pipeline_holds_the_global_limit_and_the_file_lock(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While dvc runs: the ``privaudit-dvc`` slot is taken and a second locker times out."""
    seen: dict[str, Any] = {}

    def probe(repo: Path, args: list[str], timeout_s: float | None = None, on_line: Any = None) -> str:
        with get_client(sync_client=True) as client:
            seen["active"] = client.read_global_concurrency_limit_by_name(DVC_CONCURRENCY_LIMIT).active_slots
        with pytest.raises(TimeoutError, match="another pipeline run"):
            with file_lock(repo / LOCK_FILE, timeout_s=0):
                pass
        seen["locked"] = True
        return ""

    monkeypatch.setattr(audit, "run_dvc", probe)
    monkeypatch.setattr(audit, "read_gate", lambda repo: GateResult(passed=True, reasons=(), defenders={}))
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(DVC_CONCURRENCY_LIMIT, 1)
    try:
        assert audit_flow(repo=str(micro_workspace), return_state=True).is_completed()
        with get_client(sync_client=True) as client:
            after = client.read_global_concurrency_limit_by_name(DVC_CONCURRENCY_LIMIT).active_slots
    finally:
        with get_client(sync_client=True) as client:
            client.delete_global_concurrency_limit_by_name(DVC_CONCURRENCY_LIMIT)
    assert seen == {"active": 1, "locked": True} and after == 0
    with file_lock(micro_workspace / LOCK_FILE, timeout_s=0):  # released afterwards
        pass


def test_run_dvc_streams_each_line_as_it_is_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: a Prefect run shows a long stage's lines (plan, shards with ETA) while it runs."""
    import sys

    import flows._dvc as dvc_module

    script = "import sys, time\nfor i in range(3):\n    print(f'canaries: shard {i} done', flush=True)\n    time.sleep(0.2)\n"
    monkeypatch.setattr(dvc_module, "ensure_external_data", lambda repo: None)
    seen: list[tuple[str, float]] = []
    import time

    monkeypatch.setattr(dvc_module.sys, "executable", sys.executable)
    real_popen = dvc_module.subprocess.Popen
    monkeypatch.setattr(dvc_module.subprocess, "Popen",
                        lambda cmd, **kw: real_popen([sys.executable, "-c", script], **kw))
    out = dvc_module.run_dvc(tmp_path, ["repro"], 30, on_line=lambda line: seen.append((line, time.monotonic())))
    assert [line for line, _ in seen] == [f"canaries: shard {i} done" for i in range(3)]
    assert seen[2][1] - seen[0][1] > 0.3  # delivered as printed, not all at the end
    assert out.count("done") == 3
    with pytest.raises(PipelineError, match="ran past"):
        monkeypatch.setattr(dvc_module.subprocess, "Popen",
                            lambda cmd, **kw: real_popen([sys.executable, "-c", "import time; time.sleep(30)"], **kw))
        dvc_module.run_dvc(tmp_path, ["repro"], 0.5)
