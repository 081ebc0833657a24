"""Deployments as code: names, cron schedules with their timezone, parameters, concurrency (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.deploy import build_deployments, dataset_defaults, main


def test_deployments_as_code(micro_workspace: Path) -> None:
    ws = micro_workspace
    deps = {d.name: d for d in build_deployments(ws, timezone="Europe/Berlin")}
    assert set(deps) == {"nightly-audit", "hourly-data-validation", "canary-trials-dask"}

    audit = deps["nightly-audit"]
    assert audit.flow_name == "privaudit-audit" and audit.entrypoint == "flows/audit.py:audit_flow"
    assert [(s.schedule.cron, s.schedule.timezone) for s in audit.schedules] == [("0 2 * * *", "Europe/Berlin")]
    assert audit.parameters == {"repo": str(ws), "force": False}
    assert audit.concurrency_limit == 1 and audit.concurrency_options.collision_strategy.value == "ENQUEUE"

    val = deps["hourly-data-validation"]
    assert val.flow_name == "privaudit-validate-data" and val.entrypoint == "flows/validate.py:validate_flow"
    assert [(s.schedule.cron, s.schedule.timezone) for s in val.schedules] == [("0 * * * *", "Europe/Berlin")]
    assert val.parameters == {"path": None, "dataset_name": "digits", "label_column": None, "repo": str(ws),
                              "audit_deployment": "privaudit-audit/nightly-audit"}

    canary = deps["canary-trials-dask"]
    assert canary.flow_name == "privaudit-canary-trials" and not canary.schedules

    deep = {d.name: d for d in build_deployments(ws, blackbox_runs=10000)}["nightly-audit"]
    assert deep.parameters == {"repo": str(ws), "force": False, "overrides": {"blackbox_runs": 10000}}


def test_drop_defaults_follow_params_yaml(tmp_path: Path, repo_root: Path) -> None:
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    params["dataset"].update(name="csv", path="drops/latest.csv", label_column="target")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    assert dataset_defaults(tmp_path) == {"path": str(tmp_path / "drops" / "latest.csv"), "dataset_name": "csv",
                                          "label_column": "target"}


def test_deploy_refuses_a_folder_without_pipeline(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no dvc.yaml"):
        main(["--repo", str(tmp_path), "--register-only"])


def test_blackbox_runs_flag_makes_the_nightly_audit_deep(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README: ``python -m flows.deploy --blackbox-runs 10000`` serves the nightly audit with the deep black-box audit."""
    import flows.deploy as deploy

    served: list = []
    monkeypatch.setattr(deploy, "ensure_concurrency_limit", lambda: None)
    monkeypatch.setattr(deploy, "serve", lambda *deps: served.extend(deps))
    assert main(["--repo", str(micro_workspace), "--blackbox-runs", "10000"]) == 0
    nightly = {d.name: d for d in served}["nightly-audit"]
    assert nightly.parameters["overrides"] == {"blackbox_runs": 10000}
    from flows.audit import AuditOverrides

    assert AuditOverrides(**nightly.parameters["overrides"]).as_dotted() == {"blackbox.runs": 10000}
