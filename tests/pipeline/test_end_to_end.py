"""The whole DVC pipeline on a tiny params set: outputs, contracts, caching, determinism."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.pipeline.conftest import TINY_PARAMS, run

DVC = [sys.executable, "-m", "dvc"]
WARM = [sys.executable, "-m", "privaudit.cli", "warm", "--"]


def WARM_LOGGED(log: Path) -> list[str]:  # noqa: N802 - a command prefix, like WARM
    return [sys.executable, "-m", "privaudit.cli", "warm", "--log", str(log), "--"]
METRICS = ("ltu.json", "audit.json", "bounds.json", "gate.json")


def _metrics(ws: Path) -> dict[str, bytes]:
    return {m: (ws / "metrics" / m).read_bytes() for m in METRICS}


def test_pipeline_end_to_end(workspace: Path) -> None:
    ws = workspace
    out = run(DVC + ["repro"], ws)
    for stage in ("ingest", "split", "featurize", "defenders", "ltu", "canaries", "game3", "blackbox", "lidp", "audit", "bounds", "report"):
        assert f"Running stage '{stage}'" in out.stdout, out.stdout
    for f in ("reports/audit.html", "reports/audit.md", *(f"metrics/{m}" for m in METRICS)):
        assert (ws / f).is_file(), f

    ltu = json.loads((ws / "metrics/ltu.json").read_text())
    audit = json.loads((ws / "metrics/audit.json").read_text())
    bounds = json.loads((ws / "metrics/bounds.json").read_text())
    gate = json.loads((ws / "metrics/gate.json").read_text())
    names = {d["name"] for d in TINY_PARAMS["defenders"]}
    assert set(ltu) == set(audit) == set(bounds) == set(gate["defenders"]) == names
    for name in names:
        row = ltu[name]
        assert {"accuracy", "privacy", "privacy_stderr", "utility", "utility_stderr", "rounds", "attacker"} <= set(row)
        assert row["rounds"] == TINY_PARAMS["ltu"]["rounds"] and 0 <= row["privacy"] <= 1
        assert "loss_gap" in row["attackers"]
        g3, lidp = audit[name]["game3"], audit[name]["lidp"]
        assert {"eps_low", "eps_high", "canaries"} <= set(g3) and g3["canaries"] == 40
        assert 0 <= g3["eps_low"] <= (g3["eps_high"] if g3["eps_high"] is not None else float("inf"))
        assert {"eps_lower_bound", "eps_lower_bound_k1", "trials", "canaries"} <= set(lidp)
        assert lidp["trials"] == 6 and lidp["canaries"] == 2 and lidp["eps_lower_bound"] >= 0
        assert audit[name]["claimed_epsilon"] is None
        bb = audit[name]["blackbox"]  # every audited defender, whatever its kind: many final models
        assert bb["runs_in"] == bb["runs_out"] == 20  # blackbox.runs_no_claim: neither claims an eps and bb["eps_lower_bound"] >= 0
        assert bb["threat_model"].startswith("black-box") and "Gaussian" in bb["assumption"]
        assert bb["ceiling"] is None  # the last-iterate ceiling is a DP-SGD recipe's
        assert {"thudi", "yeom", "erlingsson", "sablayrolles", "mip_eta", "empirical_accuracy"} <= set(bounds[name])
    assert isinstance(gate["passed"], bool) and isinstance(gate["reasons"], list)
    html = (ws / "reports/audit.html").read_text()
    assert ("PASS" in html) or ("FAIL" in html)

    verdict = [sys.executable, "-m", "privaudit.cli", "verdict", "--plain"]
    assert run(verdict, ws, check=False).returncode == (0 if gate["passed"] else 1)  # a fresh gate

    # nothing changed → nothing to do (user_code and environment are always_changed; each rewrites the same JSON;
    # history, always_changed too, records that the run happened)
    lock = (ws / "dvc.lock").read_bytes()
    again = run(DVC + ["repro"], ws)
    ran = [line for line in again.stdout.splitlines() if line.startswith("Running stage")]
    assert sorted(ran) == ["Running stage 'environment':", "Running stage 'history':", "Running stage 'user_code':"], \
        again.stdout
    assert (ws / "dvc.lock").read_bytes() == lock  # the history stage has no outputs: the lock stays as it was
    from privaudit.history.store import HistoryStore

    records = HistoryStore(ws).read()  # one record per dvc repro, in a repository without a commit yet
    assert len(records) == 2 and records[0].commit is None and records[-1].trigger == "dvc repro"
    assert set(records[-1].defenders) == names and (ws / "reports/history.html").is_file()
    assert run(verdict, ws, check=False).returncode == (0 if gate["passed"] else 1)  # still fresh

    # a data file under data/external (where README says user data lives) is the ingest stage's dep
    extra = ws / "data/external/new.csv"
    extra.write_text("f0,label\n1,0\n")
    status = run(DVC + ["status", "ingest"], ws)
    assert "changed deps" in status.stdout and "data/external" in status.stdout, status.stdout
    extra.unlink()
    assert "changed" not in run(DVC + ["status", "ingest"], ws).stdout

    # ltu.rounds changes → ltu and its dependants only
    first = _metrics(ws)
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["ltu"]["rounds"] = 300
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stale = run(verdict, ws, check=False)  # the gate predates the new ltu.rounds
    assert stale.returncode == 2 and "ltu.rounds changed" in stale.stderr and "dvc repro" in stale.stderr
    partial = run(WARM + DVC + ["repro"], ws)  # on a warm stage server (privaudit warm, as make audit runs it)
    assert run(verdict, ws, check=False).returncode in (0, 1)
    ran = {s for s in ("ingest", "split", "featurize", "defenders", "canaries", "game3", "blackbox", "lidp", "audit", "ltu",
                       "bounds", "report")
           if f"Running stage '{s}'" in partial.stdout}
    assert ran == {"ltu", "bounds", "report"}, partial.stdout

    # back to the original params, forced full rerun on a warm stage server → the same bytes as the first, cold run
    # (CPU determinism, and a stage forked from the warm server computes what a fresh process computes)
    params["ltu"]["rounds"] = TINY_PARAMS["ltu"]["rounds"]
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    log = ws / ".dvc" / "tmp" / "warm.jsonl"
    forced = run(WARM_LOGGED(log) + DVC + ["repro", "--force"], ws)
    second = _metrics(ws)
    ran = {line.split("'")[1] for line in forced.stdout.splitlines() if line.startswith("Running stage")}
    warm = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r["exit"] == 0 for r in warm) and {r["module"] for r in warm} <= {f"stages.{s}" for s in ran}
    assert {"stages.ltu", "stages.canaries", "stages.audit", "stages.report"} <= {r["module"] for r in warm}, warm
    for m in METRICS:
        if m == "gate.json":
            continue
        assert first[m] == second[m], f"metrics/{m} differs between two runs with the same params"
    assert json.loads(first["gate.json"]) == json.loads(second["gate.json"])


def test_bad_params_stop_before_work(workspace: Path, tmp_path: Path) -> None:
    ws = workspace
    params = yaml.safe_load((ws / "params.yaml").read_text())
    bad = {**params, "ltu": {**params["ltu"], "rounds": 0}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = run([sys.executable, "-m", "stages.ltu", "--params", str(tmp_path / "bad.yaml"),
                "--metrics", str(tmp_path / "m.json"), "--out", str(tmp_path / "ltu")], ws, check=False)
    assert proc.returncode == 1
    assert "ltu.rounds" in proc.stderr
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "ltu").exists()
