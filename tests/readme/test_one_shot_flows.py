"""The README's one-shot flow commands, as real programs, with no Prefect server configured (issue 28).

"Without a server, each flow also runs once from the command line, on a temporary local Prefect
instance": ``python -m flows.audit [-S ltu.rounds=500]``, ``python -m flows.validate PATH
--dataset-name csv --label-column label``, ``python -m flows.canary_trials [tcp://scheduler:8786]``.
Each runs here in a subprocess without ``PREFECT_API_URL`` (a fresh ``PREFECT_HOME``), so Prefect
starts its temporary server, as on a newcomer's machine. ``flows.validate`` used to end in a
``prefect.exceptions.ObjectNotFound`` traceback there (a deployment lookup) and recorded nothing.
Also ``rm -r data/.shards`` (the canary-trials flow then recomputes every shard).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.flows.conftest import git_commit, micro_params
from tests.pipeline.conftest import make_workspace
from tests.readme.commands import doc_snippets

pytestmark = pytest.mark.slow  # three micro pipelines through the real flows: ~5-10 min on 2 cores


def _readme_command(prefix: str) -> list[str]:
    """The README's command starting with ``prefix``, split, optional ``[...]`` parts dropped."""
    [text] = {s.text for s in doc_snippets() if s.text.startswith(prefix)}
    return [word for word in text.split() if not word.startswith("[") and not word.endswith("]")]


def _one_shot(args: list[str], ws: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               DVC_NO_ANALYTICS="1", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, *args[1:], "--repo", str(ws)], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "ObjectNotFound" not in out, out[-4000:]
    assert "temporary server" in out, out[-2000:]  # no server configured: Prefect's own temporary one
    return proc


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def ws(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_workspace(repo_root, tmp_path_factory.mktemp("oneshot"), micro_params(repo_root))
    git_commit(ws)
    return ws


def test_audit_one_shot(ws: Path, tmp_path: Path) -> None:
    proc = _one_shot(_readme_command("python -m flows.audit"), ws, tmp_path / "home")
    line = _last_line(proc)
    gate = json.loads((ws / "metrics" / "gate.json").read_text())
    assert line == ("release gate passed" if gate["passed"] else line) and proc.returncode == (0 if gate["passed"] else 1)
    # the README's optional override: `-S ltu.rounds=500` (a smaller value here), recorded as a DVC experiment
    proc = _one_shot([*_readme_command("python -m flows.audit"), "-S", "ltu.rounds=60"], ws, tmp_path / "home")
    assert proc.returncode in (0, 1) and _last_line(proc).startswith("release gate")
    assert yaml.safe_load((ws / "params.yaml").read_text())["ltu"]["rounds"] == 50  # the override was for that run only


def test_validate_one_shot_audits_and_records(ws: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = np.arange(300) % 2
    frame = pd.DataFrame(rng.normal(size=(300, 4)) + 2.0 * y[:, None], columns=["a", "b", "c", "d"])
    frame["label"] = y
    drop = ws / "data" / "external" / "drop.csv"
    frame.to_csv(drop, index=False)
    command = [drop.as_posix() if word == "PATH" else word for word in _readme_command("python -m flows.validate")]
    assert command[1:3] == ["-m", "flows.validate"] and "--label-column" in command

    proc = _one_shot(command, ws, tmp_path / "home")
    line = _last_line(proc)
    assert line.startswith("validation passed; data changed; audit flow run") and "ran here" in line, proc.stdout[-3000:]
    assert proc.returncode == (0 if ": Completed: release gate passed" in line else 1)
    [entry] = json.loads((ws / ".dvc" / "tmp" / "privaudit-validated.json").read_text()).values()
    assert len(entry["sha256"]) == 64 and entry["audit_flow_run_id"] in line  # recorded as validated

    again = _one_shot(command, ws, tmp_path / "home")  # same content: nothing to audit
    assert again.returncode == 0 and "unchanged" in _last_line(again)


def test_canary_trials_one_shot_after_removing_the_shards(ws: Path, tmp_path: Path) -> None:
    [rm] = {s.text for s in doc_snippets() if s.text == "rm -r data/.shards"}
    subprocess.run(rm.split(), cwd=ws, check=False)
    assert not (ws / "data" / ".shards").exists()
    proc = _one_shot([*_readme_command("python -m flows.canary_trials"), "--workers", "1"], ws, tmp_path / "home")
    # Completed: "computed N shard(s); release gate passed"; Failed: the gate's "release gate failed: …"
    done = re.fullmatch(r"(?:computed (\d+) shard\(s\); )?release gate (passed|failed: .+)", _last_line(proc))
    assert done, proc.stdout[-3000:]
    assert proc.returncode == (0 if done.group(2) == "passed" else 1)
    assert done.group(2) != "passed" or int(done.group(1)) > 0
    assert any((ws / "data" / ".shards").rglob("*")), "the flow computed no shard"
