"""README "Changing parameters" and "Reviewing an audit": the DVC experiment commands, run as written.

On a committed micro audit: ``dvc exp run -S … -n more-rounds``, ``dvc params diff``, ``dvc metrics
diff --precision 3``, the ``dvc exp show --md --drop … --keep …`` of the README (its regex must keep
the privacy, ε lower-bound and ``passed`` columns and drop the rest), ``dvc plots diff HEAD -o …``,
``dvc exp show``, ``dvc exp apply``, the README's way back (``git checkout HEAD -- … ; dvc checkout --allow-missing && dvc repro``), ``dvc exp remove``,
``dvc exp run -S ltu.rounds=… -S lidp.trials=…`` and the ``retrain`` attackers experiment. Only
numbers are made smaller (``ltu.rounds``, ``lidp.trials``), so a README command that stops working fails here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flows.conftest import git_commit, micro_params
from tests.pipeline.conftest import make_workspace, pipeline_env, run
from tests.readme.commands import doc_snippets

pytestmark = pytest.mark.slow  # a micro pipeline and four partial reruns: ~3-6 min on 2 cores

SMALLER = {"ltu.rounds=3000": "ltu.rounds=80", "ltu.rounds=2000": "ltu.rounds=60", "lidp.trials=64": "lidp.trials=6"}


def readme(prefix: str) -> str:
    """The one README command starting with ``prefix`` (numbers made smaller)."""
    found = {s.text for s in doc_snippets() if s.kind == "command" and s.text.startswith(prefix)}
    assert len(found) == 1, (prefix, found)
    text = found.pop()
    for big, small in SMALLER.items():
        text = text.replace(big, small)
    return text


def exact(command: str) -> str:
    """``command``, which the README gives exactly so."""
    assert command in {s.text for s in doc_snippets() if s.kind == "command"}, command
    return command


def sh(command: str, ws: Path) -> str:
    """Run a README command line (``dvc`` as this interpreter's module; ``&&`` chains through bash)."""
    command = re.sub(r"(^|&& )dvc ", rf"\1{shlex.quote(sys.executable)} -m dvc ", command)
    proc = subprocess.run(["bash", "-c", command], cwd=ws, env=pipeline_env(), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, f"{command} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def rounds(ws: Path) -> int:
    return yaml.safe_load((ws / "params.yaml").read_text())["ltu"]["rounds"]


def test_review_an_audit_as_the_readme_shows(repo_root: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo_root, tmp_path / "ws", micro_params(repo_root))
    run([sys.executable, "-m", "dvc", "repro"], ws)
    git_commit(ws)
    assert rounds(ws) == 50

    sh(readme("dvc exp run -S ltu.rounds=3000 -n more-rounds"), ws)
    out = sh(readme("dvc params diff"), ws)
    assert re.search(r"params\.yaml\s+ltu\.rounds\s+50\s+80", out), out
    out = sh(readme("dvc metrics diff --precision 3"), ws)
    assert "metrics/summary.json" in out and "logreg.ltu.privacy" in out, out
    out = sh(readme("dvc exp show --md --drop"), ws)
    header = out.splitlines()[0]
    columns = {c.strip() for c in header.strip("|").split("|")}
    assert {"Experiment", "defenders.logreg.ltu.privacy", "defenders.logreg.passed"} <= columns, header
    assert any(".eps_hat." in c for c in columns), header
    assert not any(c.endswith(".utility") for c in columns), header  # the rest dropped
    assert "more-rounds" in out
    sh(readme("dvc plots diff HEAD -o dvc_plots_diff"), ws)
    assert (ws / "dvc_plots_diff" / "index.html").is_file()

    back = [exact("git checkout HEAD -- params.yaml dvc.lock metrics"), exact("dvc checkout --allow-missing && dvc repro")]
    for command in back:  # back to the committed audit
        sh(command, ws)
    assert rounds(ws) == 50
    sh(exact("dvc exp apply <name>").replace("<name>", "more-rounds"), ws)
    assert rounds(ws) == 80
    for command in back:
        sh(command, ws)
    assert rounds(ws) == 50
    sh(readme("dvc exp remove more-rounds"), ws)
    assert "more-rounds" not in sh(exact("dvc exp show"), ws)

    sh(readme("dvc exp run -S ltu.rounds=2000 -S lidp.trials=64"), ws)
    assert rounds(ws) == 60 and yaml.safe_load((ws / "params.yaml").read_text())["lidp"]["trials"] == 6
    for command in back:
        sh(command, ws)
    sh(readme("dvc exp run -S 'ltu.attackers=[loss_gap,retrain,lira,rmia]'"), ws)
    ltu = yaml.safe_load((ws / "metrics" / "ltu.json").read_text())  # JSON is YAML
    assert "retrain" in ltu["logreg"]["attackers"]
