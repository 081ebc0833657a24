"""Issue 34: the lidp stage's output (``python -m stages.lidp``) has no blank line, and names each defender's bound.

The generic audit stage printed ``"\\n".join(result.lines())`` and the LiDP audit gave no summary
line, so the stage printed an empty line where its result should have been.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from tests.info_files import write_info

REPO = Path(__file__).resolve().parents[2]


def _lidp_stage(tmp: Path, defenders: list[dict], audited: list[str]) -> subprocess.CompletedProcess[str]:
    params = {"base": {"seed": 3, "device": "cpu"}, "defenders": defenders, "canaries": {"defenders": audited},
              "lidp": {"trials": 64, "tau_quantiles": 4}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    rng = np.random.default_rng(0)
    for spec in defenders:
        write_info(tmp / "data" / "defenders", spec["name"], claimed_epsilon=None, claimed_delta=None,
                   claimed_neighbourhood=None)
        (tmp / "data" / "canaries" / spec["name"]).mkdir(parents=True)
        np.savez(tmp / "data" / "canaries" / spec["name"] / "lidp.npz",
                 loss_in=rng.normal(-1.0, 1, (64, 8)) + 10, loss_null=rng.normal(0, 1, (64, 8)) + 10)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "stages.lidp", "--params", "params.yaml"], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_lidp_stage_prints_one_line_per_audited_defender_and_no_blank_line(tmp_path: Path) -> None:
    proc = _lidp_stage(tmp_path, [{"name": "a", "kind": "logistic_regression"},
                                  {"name": "b", "kind": "logistic_regression"}], audited=["a", "b"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.strip() for line in lines), repr(proc.stdout)
    assert [line.split(":")[:2] for line in lines] == [["lidp", " a"], ["lidp", " b"]], lines
    block = json.loads((tmp_path / "data" / "audit" / "lidp.json").read_text())
    assert f"eps_hat={block['a']['eps_lower_bound']:.3f}" in lines[0]
    assert f"{block['a']['certified_trials']} of {block['a']['trials']} trials" in lines[0]


def test_an_audit_stage_that_audits_no_defender_prints_nothing(tmp_path: Path) -> None:
    proc = _lidp_stage(tmp_path, [{"name": "a", "kind": "logistic_regression"}], audited=[])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", repr(proc.stdout)
