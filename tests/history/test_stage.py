"""The history stage on a workspace with the default audit's real metrics: record, flag, page, glue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest

from privaudit.cli import main as cli_main
from privaudit.history.stage import HistoryPaths, HistoryPlan, run_history, trigger_of
from privaudit.history.store import HistoryStore
from tests.history.conftest import T0, commit_file, git

ROOT = Path(__file__).resolve().parents[2]
ENV = {"python": "3.11.7", "packages": {"numpy": "2.4.6", "opacus": "1.6.0", "torch": "2.13.0+cpu"}}


def _npz(path: Path, arrays: dict[str, bytes], date: tuple[int, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in arrays.items():
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=date), data)


@pytest.fixture()
def ws(repo: Path) -> Path:
    """The temp repository with the committed default audit's metrics and a tiny ingested source."""
    (repo / "metrics").mkdir()
    for name in ("ltu", "audit", "bounds", "gate"):
        shutil.copy(ROOT / "metrics" / f"{name}.json", repo / "metrics" / f"{name}.json")
    (repo / "data").mkdir()
    (repo / "data" / "environment.json").write_text(json.dumps(ENV))
    (repo / "data" / "user_code.json").write_text("{}")
    _npz(repo / "data" / "source" / "source.npz", {"X": b"x" * 64, "y": b"y" * 8}, (2026, 1, 1, 0, 0, 0))
    (repo / "data" / "source" / "meta.json").write_text('{"name": "digits"}')
    commit_file(repo, "src/privaudit/defenders/dp_sgd.py", "NOISE = 1.0\n")
    return repo


def _run(ws: Path, day: int, trigger: str = "dvc repro"):
    paths = HistoryPaths(gate=ws / "metrics/gate.json", ltu=ws / "metrics/ltu.json", audit=ws / "metrics/audit.json",
                         bounds=ws / "metrics/bounds.json", environment=ws / "data/environment.json",
                         user_code=ws / "data/user_code.json",
                         out=ws / "reports/history.html", repo=ws)
    return run_history(paths, HistoryPlan(identity="digits", digest="d" * 64, params={"dataset": {"name": "digits"}}), trigger,
                       T0 + timedelta(days=day))


def _raise_whitebox(ws: Path, eps: float) -> None:
    path = ws / "metrics" / "audit.json"
    audit = json.loads(path.read_text())
    audit["dpsgd_eps1"]["whitebox"]["eps_lower_bound"] = eps
    path.write_text(json.dumps(audit))


def test_each_run_is_recorded_with_what_it_saw_and_an_honest_rerun_is_not_flagged(ws: Path) -> None:
    first, flagged1 = _run(ws, 0)
    second, flagged2 = _run(ws, 1, trigger="prefect deployment privaudit-audit/nightly-audit (flow run calm-fox)")
    assert flagged1 == flagged2 == []
    assert first.commit == git(ws, "rev-parse", "HEAD") and first.dirty is False
    assert first.packages["opacus"] == "1.6.0" and first.data.identity == "digits" and first.data.digest
    dp = first.defenders["dpsgd_eps1"]
    assert dp.verdict == "PASS" and dp.claimed_epsilon == pytest.approx(0.997005)
    assert [b.kind for b in dp.eps_hat] == ["whitebox", "one_run", "blackbox", "lidp", "game3"]
    assert dp.bound("whitebox").epsilon == pytest.approx(0.9579082118737331)
    assert dp.bound("whitebox").level == pytest.approx(0.05 / 6)
    assert dp.bound("one_run").detectable_epsilon == pytest.approx(1.6092059606361389)
    assert dp.utility == pytest.approx(0.8146088246199482)
    assert first.defenders["logreg"].claimed_epsilon is None
    records = HistoryStore(ws).read()
    assert [r.trigger for r in records] == ["dvc repro", second.trigger]
    page = (ws / "reports" / "history.html").read_text()
    assert "2 recorded run(s)" in page and "No regression in the latest run" in page and "<svg" in page
    assert oct((ws / "reports" / "history.html").stat().st_mode & 0o777) == "0o644"


def test_a_planted_package_downgrade_is_flagged_in_the_record_page_and_cli(ws: Path, capsys: pytest.CaptureFixture[str]
                                                                          ) -> None:
    _run(ws, 0)
    (ws / "data" / "environment.json").write_text(json.dumps({**ENV, "packages": {**ENV["packages"], "opacus": "1.5.0"}}))
    _raise_whitebox(ws, 2.2)
    _, flagged = _run(ws, 1)
    assert [(g.defender, g.kind) for g in flagged] == [("dpsgd_eps1", "whitebox")]
    assert flagged[0].changes == ("packages opacus 1.6.0 → 1.5.0",)
    page = (ws / "reports" / "history.html").read_text()
    assert "Regression in the latest run" in page and "opacus 1.6.0 → 1.5.0" in page and 'class="regression"' in page
    capsys.readouterr()
    assert cli_main(["history", "--repo", str(ws)]) == 1  # the latest run has a regression
    out = capsys.readouterr().out
    assert "#2" in out and "REGRESSION  dpsgd_eps1: whitebox" in out and "opacus 1.6.0 → 1.5.0" in out
    assert cli_main(["history", "--repo", str(ws), "--json", "--defender", "logreg"]) == 0  # logreg did not regress
    data = json.loads(capsys.readouterr().out)
    assert len(data["records"]) == 2 and set(data["records"][0]["defenders"]) == {"logreg"} and data["regressions"] == []
    assert cli_main(["history", "--repo", str(ws), "--defender", "nope"]) == 2
    assert "recorded defenders: dpsgd_eps1, logreg, mlp" in capsys.readouterr().err


def test_a_committed_trainer_edit_is_named_with_its_files(ws: Path) -> None:
    _run(ws, 0)
    old = git(ws, "rev-parse", "HEAD")
    new = commit_file(ws, "src/privaudit/defenders/dp_sgd.py", "NOISE = 0.5  # halved\n")
    _raise_whitebox(ws, 2.4)
    _, flagged = _run(ws, 1)
    assert flagged[0].changes == (f"commit {old[:12]} → {new[:12]} (src/privaudit/defenders/dp_sgd.py)",)


def test_the_record_carries_the_ingest_stamp(ws: Path) -> None:
    """The data digest is the ingest stage's (the one the release ledger records), not a second hash of the files."""
    record, _ = _run(ws, 0)
    assert (record.data.identity, record.data.digest) == ("digits", "d" * 64)


def test_trigger_from_the_environment() -> None:
    assert trigger_of({}) == "dvc repro"
    assert trigger_of({"DVC_EXP_BASELINE_REV": "abc"}) == "dvc exp run"
    assert trigger_of({"PRIVAUDIT_TRIGGER": "make audit", "DVC_EXP_BASELINE_REV": "abc"}) == "make audit"


def _stage(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "params.yaml", cwd / "params.yaml")
    environ = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **env}
    return subprocess.run([sys.executable, "-m", "stages.history", "--params", "params.yaml"], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=300)


def test_the_stage_glue_records_the_trigger_and_refuses_outside_git(ws: Path, tmp_path: Path) -> None:
    proc = _stage(ws, PRIVAUDIT_TRIGGER="prefect deployment privaudit-audit/nightly-audit (flow run calm-fox)")
    assert proc.returncode == 0, proc.stderr
    assert "history: recorded prefect deployment privaudit-audit/nightly-audit" in proc.stdout
    assert HistoryStore(ws).read()[-1].trigger.startswith("prefect deployment privaudit-audit/nightly-audit")
    bare = tmp_path / "bare"
    shutil.copytree(ws, bare, ignore=shutil.ignore_patterns(".git"))
    proc = _stage(bare)
    assert proc.returncode == 1 and "not inside a git repository" in proc.stderr and "git init" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_repository_without_a_commit_is_recorded_without_one(tmp_path: Path) -> None:
    """The fresh `git init` + `dvc init` workspaces of the pipeline tests: no HEAD yet."""
    ws = tmp_path / "fresh"
    (ws / "metrics").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for name in ("ltu", "audit", "bounds", "gate"):
        shutil.copy(ROOT / "metrics" / f"{name}.json", ws / "metrics" / f"{name}.json")
    record, flagged = _run(ws, 0)
    assert record.commit is None and record.dirty is None and flagged == []
    assert HistoryStore(ws).read() == [record]


def test_the_page_lists_the_latest_runs_and_charts_every_run() -> None:
    from privaudit.history.page import TABLE_RUNS, render_history
    from tests.history.conftest import record

    records = [record(i) for i in range(TABLE_RUNS + 5)]
    page = render_history(records, [])
    assert page.count("<tr><td>") == TABLE_RUNS and f"lists all {TABLE_RUNS + 5}" in page
    assert f"whitebox run {TABLE_RUNS + 5}:" in page and "whitebox run 1:" in page
