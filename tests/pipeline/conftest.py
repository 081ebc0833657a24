"""A throw-away copy of the repository with a tiny params set, for running the real pipeline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"

#: tiny overrides of the repository's params.yaml (DVC needs every key dvc.yaml lists)
TINY_OVERRIDES = {
    "base": {"seed": 7, "device": "cpu"},
    "dataset": {"name": "digits", "max_samples": 600},
    "defenders": [
        {"name": "logreg", "kind": "logistic_regression"},
        {"name": "mlp", "kind": "torch_mlp", "hidden": [16], "epochs": 4, "batch_size": 32},
    ],
    "ltu": {"rounds": 200},
    "game3": {"canaries": 40, "tau_steps": 4},
    "lidp": {"trials": 6, "tau_quantiles": 4},
    "blackbox": {"runs": 40, "runs_no_claim": 20, "sequential_runs": 16, "block": 40},
}


def merged_params(overrides: dict) -> dict:
    """The repository's params.yaml with ``overrides`` merged in, block by block (lists replace)."""
    params = yaml.safe_load(REPO_PARAMS.read_text())
    for block, value in overrides.items():
        if isinstance(value, dict) and isinstance(params.get(block), dict):
            params[block] = {**params[block], **value}
        else:
            params[block] = value
    return params


TINY_PARAMS = merged_params(TINY_OVERRIDES)

COPIED = ("dvc.yaml", ".dvcignore", "releases.yaml", "stages", "src", "benchmarks/results", "data/external")


def pipeline_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's bin first, no analytics."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(DO_NOT_TRACK="1", DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="False", CI="1")
    return env


def run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=pipeline_env(), capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def make_workspace(repo_root: Path, dest: Path, params: dict) -> Path:
    """Copy the pipeline definition and code into ``dest``; ``git init`` + ``dvc init`` there."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src = repo_root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "init", "-q"], dest)
    run([sys.executable, "-m", "dvc", "init", "-q"], dest)
    run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], dest)
    return dest


@pytest.fixture(scope="module")
def workspace(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(repo_root, tmp_path_factory.mktemp("pipeline"), TINY_PARAMS)
