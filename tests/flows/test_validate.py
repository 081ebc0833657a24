"""The data-validation flow: a bad drop fails without starting an audit; a good one starts it once per content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pandas as pd
import pytest
import yaml

import flows.validate as validate
from flows.audit import audit_flow
from flows.validate import STATE_FILE, DropRejected, audit_parameters, content_hash, validate_flow
from privaudit.data.sources import load_source
from tests.flows.helpers import artifacts_of, runs_of_deployment

pytestmark = pytest.mark.usefixtures("prefect_harness")


def write_drop(path: Path, n: int = 40, seed: int = 0, inf_row: int | None = None, classes: int = 2) -> Path:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    frame["label"] = np.arange(n) % classes
    if inf_row is not None:
        frame.loc[inf_row, "b"] = np.inf
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def deployment(micro_workspace: Path) -> tuple[str, UUID]:
    """The audit deployment registered on the ephemeral server (nothing executes its runs here)."""
    dep = audit_flow.to_deployment(name="nightly-audit-test", parameters={"repo": str(micro_workspace)})
    return f"{audit_flow.name}/nightly-audit-test", dep.apply()


def _run(ws: Path, drop: Path | None, name: str, state_file: Path, **kw: Any) -> Any:
    return validate_flow(path=str(drop) if drop else None, dataset_name=name, label_column="label" if name == "csv" else None,
                         repo=str(ws), audit_deployment=kw.pop("audit", None) or "unused/none", state_file=str(state_file),
                         return_state=True, **kw)


def test_good_drop_starts_the_audit_once_per_content(micro_workspace: Path, deployment: tuple[str, UUID],
                                                     tmp_path: Path) -> None:
    name, dep_id = deployment
    drop, state_file = write_drop(tmp_path / "drop.csv"), tmp_path / "state.json"
    before = len(runs_of_deployment(dep_id))

    first = _run(micro_workspace, drop, "csv", state_file, audit=name)
    assert first.is_completed(), first.message
    runs = runs_of_deployment(dep_id)
    assert len(runs) == before + 1
    [run] = [r for r in runs if str(r.id) == first.result()["audit_flow_run_id"]]
    assert run.state.is_scheduled()  # created, not waited for
    assert run.parameters["force"] is True
    assert run.parameters["overrides"] == {"dataset_name": "csv", "dataset_path": str(drop.resolve()),
                                           "dataset_label_column": "label"}
    recorded = json.loads(state_file.read_text())
    [entry] = recorded.values()
    assert entry["sha256"] == content_hash(load_source("csv", str(drop), "label"))

    again = _run(micro_workspace, drop, "csv", state_file, audit=name)  # same content → no audit
    assert again.is_completed() and "unchanged" in again.message
    assert len(runs_of_deployment(dep_id)) == before + 1

    write_drop(drop, seed=1)  # new content at the same path → audit again
    third = _run(micro_workspace, drop, "csv", state_file, audit=name)
    assert third.is_completed() and "data changed" in third.message
    assert len(runs_of_deployment(dep_id)) == before + 2


@pytest.mark.parametrize("case", ["one_class", "too_few_rows", "inf_feature", "text_column"])
def test_failed_validation_fails_and_starts_no_audit(micro_workspace: Path, deployment: tuple[str, UUID],
                                                     tmp_path: Path, case: str) -> None:
    name, dep_id = deployment
    state_file = tmp_path / "state.json"
    drop = tmp_path / "drop.csv"
    min_rows = 2
    if case == "one_class":  # loads, but the GX suite wants n_classes >= 2
        write_drop(drop, classes=1)
    elif case == "inf_feature":  # refused by the loader's own checks
        write_drop(drop, inf_row=3)
    elif case == "too_few_rows":
        write_drop(drop, n=6)
        min_rows = 50
    else:
        drop.write_text("a,b,label\n1,x,0\n2,y,1\n")  # text feature column: the loader refuses it
    before = len(runs_of_deployment(dep_id))

    state = _run(micro_workspace, drop, "csv", state_file, audit=name, min_rows=min_rows)

    assert state.is_failed()
    assert state.message.startswith("data validation failed")
    with pytest.raises(DropRejected) as raised:
        state.result()
    assert len(raised.value.failures) >= 1
    assert len(runs_of_deployment(dep_id)) == before  # no audit started
    assert not state_file.exists()  # nothing recorded as validated
    md = artifacts_of(state.state_details.flow_run_id)["privaudit-data-validation"].data
    assert "Data validation FAILED" in md and "no audit was started" in md
    expected = {"one_class": "expect_column_values_to_be_between(column='n_classes'",
                "too_few_rows": "expect_table_row_count_to_be_between",
                "inf_feature": "infinite feature values (first: data row 4, columns ['b'])",
                "text_column": "load_source('csv'"}[case]
    assert expected in md and expected in state.message


def test_embedded_dataset_and_default_state_file(micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``digits`` (no path) with the default state file under ``.dvc/tmp``; a fake ``run_deployment``."""
    started: list[tuple[str, dict[str, Any]]] = []

    class FakeRun:
        id = UUID(int=1)

    def fake_run_deployment(name: str, parameters: dict[str, Any], **kw: Any) -> FakeRun:
        assert kw.get("timeout") == 0
        started.append((name, parameters))
        return FakeRun()

    monkeypatch.setattr(validate, "run_deployment", fake_run_deployment)
    state_file = micro_workspace / STATE_FILE
    state_file.unlink(missing_ok=True)
    kwargs: dict[str, Any] = dict(path=None, dataset_name="digits", repo=str(micro_workspace), audit_deployment="a/b")
    assert validate_flow(**kwargs, return_state=True).is_completed()
    assert validate_flow(**kwargs, return_state=True).is_completed()
    # the workspace's params.yaml already audits digits: only force, no dataset overrides
    assert started == [("a/b", {"repo": str(micro_workspace), "force": True})]
    assert state_file.is_file()
    state_file.unlink()


def test_audit_parameters_only_override_what_differs(micro_workspace: Path, tmp_path: Path) -> None:
    assert audit_parameters(micro_workspace, "digits", None, None) == {"repo": str(micro_workspace), "force": True}
    p = audit_parameters(micro_workspace, "digits", None, "label")
    assert p["overrides"] == {"dataset_label_column": "label"}


def test_a_drop_inside_the_repository_is_named_as_params_yaml_would(micro_workspace: Path, tmp_path: Path) -> None:
    """A drop under the repository is passed relative to it, so the data set's default identity (the ledger's
    grouping) is the one a hand-edited params.yaml gives (``csv:data/external/own.csv``); outside, absolute."""
    from privaudit.config import DatasetParams

    inside = micro_workspace / "data" / "external" / "own.csv"
    p = audit_parameters(micro_workspace, "csv", str(inside), "label")
    assert p["overrides"]["dataset_path"] == "data/external/own.csv"
    identity = DatasetParams(name="csv", path=p["overrides"]["dataset_path"], label_column="label").data_identity()
    assert identity == DatasetParams(name="csv", path="./data/external/own.csv", label_column="label").data_identity()
    assert identity == "csv:data/external/own.csv"
    outside = tmp_path / "drop.csv"
    assert audit_parameters(micro_workspace, "csv", str(outside), "label")["overrides"]["dataset_path"] == str(
        outside.resolve())


def test_content_hash_sees_any_change(tmp_path: Path) -> None:
    a = load_source("csv", str(write_drop(tmp_path / "a.csv")), "label")
    b = load_source("csv", str(write_drop(tmp_path / "b.csv")), "label")
    c = load_source("csv", str(write_drop(tmp_path / "c.csv", seed=3)), "label")
    assert content_hash(a) == content_hash(b) != content_hash(c)
    flipped = a.y.copy()
    flipped[0] = 1 - flipped[0]
    assert content_hash(type(a)(X=a.X, y=flipped, ids=a.ids, meta=a.meta)) != content_hash(a)


def test_one_shot_command_audits_here_without_a_deployment(micro_workspace: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: ``python -m flows.validate PATH ...`` looked up a deployment the temporary server cannot have
    (``ObjectNotFound``) and recorded nothing. Now the audit flow runs here as a subflow, and the drop is recorded.

    The harness server holds no deployment named like the served one, exactly as a temporary server; the
    audit flow is a stand-in here (the real one end to end: ``tests/readme/test_one_shot_flows.py``).
    """
    from prefect import flow
    from prefect.states import Completed, Failed

    calls: list[dict[str, Any]] = []
    gate = {"passed": True}

    @flow(name="stand-in-audit")
    def stand_in(repo: str, force: bool, overrides: dict[str, Any] | None = None) -> Any:
        calls.append({"repo": repo, "force": force, "overrides": overrides})
        return Completed(message="release gate passed") if gate["passed"] else Failed(message="release gate failed: x")

    monkeypatch.setattr(validate, "audit_flow", stand_in)
    drop, state_file = write_drop(tmp_path / "drop.csv"), tmp_path / "state.json"
    argv = [str(drop), "--dataset-name", "csv", "--label-column", "label", "--repo", str(micro_workspace),
            "--state-file", str(state_file)]

    assert validate.main(argv) == 0
    out = capsys.readouterr().out
    assert "validation passed; data changed; audit flow run" in out and "release gate passed" in out
    assert calls == [{"repo": str(micro_workspace), "force": True, "overrides": {
        "dataset_name": "csv", "dataset_path": str(drop.resolve()), "dataset_label_column": "label"}}]
    [entry] = json.loads(state_file.read_text()).values()  # recorded as validated
    assert entry["sha256"] == content_hash(load_source("csv", str(drop), "label")) and entry["audit_flow_run_id"]

    assert validate.main(argv) == 0 and "unchanged" in capsys.readouterr().out  # no second audit
    assert len(calls) == 1

    gate["passed"] = False  # a new drop whose audit fails the gate: exit 1, the drop is still recorded
    write_drop(drop, seed=5)
    assert validate.main(argv) == 1
    assert "release gate failed: x" in capsys.readouterr().out and len(calls) == 2


def test_unregistered_deployment_fails_in_one_line(micro_workspace: Path, tmp_path: Path) -> None:
    """Asked for a deployment the server does not have: a Failed state naming it and both fixes, no traceback."""
    drop, state_file = write_drop(tmp_path / "drop.csv"), tmp_path / "state.json"
    state = _run(micro_workspace, drop, "csv", state_file, audit="privaudit-audit/no-such-deployment")
    assert state.is_failed()
    assert "'privaudit-audit/no-such-deployment' is not registered" in state.message
    assert "python -m flows.deploy" in state.message and "without --audit-deployment" in state.message
    assert "\n" not in state.message and not state_file.exists()


def test_the_command_without_a_path_validates_the_data_set_params_yaml_names(
        micro_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m flows.validate`` alone: the params.yaml data set (as the deployment does), not a csv without a
    path reported as "data validation failed"; ``--dataset-name csv`` without a PATH is a usage error."""
    import flows.validate as fv

    seen: dict[str, Any] = {}

    class _Done:
        message = "validation passed"

        def is_completed(self) -> bool:
            return True

        def result(self) -> dict[str, Any]:
            return {}

    def fake_flow(**kw: Any) -> _Done:
        seen.update(kw)
        return _Done()

    fake_flow.description = fv.validate_flow.description  # type: ignore[attr-defined]
    monkeypatch.setattr(fv, "validate_flow", fake_flow)
    assert fv.main(["--repo", str(micro_workspace)]) == 0
    params = yaml.safe_load((micro_workspace / "params.yaml").read_text())["dataset"]
    assert (seen["dataset_name"], seen["path"]) == (params["name"], params.get("path"))
    with pytest.raises(SystemExit) as usage:
        fv.main(["--dataset-name", "csv", "--repo", str(micro_workspace)])
    assert usage.value.code == 2
