"""Flow tests: one ephemeral Prefect server for the session, a micro params set, temp workspaces.

The harness is opted into per module (``pytestmark = pytest.mark.usefixtures("prefect_harness")``)
so that the ``server`` test, which starts its own real server, does not start it too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.pipeline.conftest import make_workspace

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

# The smallest pipeline that still exercises every stage: one defender, few rounds/trials.
MICRO_PARAMS: dict[str, Any] = {
    "base": {"seed": 7, "device": "cpu"},
    "dataset": {"name": "digits", "path": None, "label_column": None, "max_samples": 300},
    "defenders": [{"name": "logreg", "kind": "logistic_regression"}],
    "game3": {"canaries": 20, "tau_steps": 2},
    "lidp": {"trials": 4, "tau_quantiles": 2},
    "blackbox": {"runs": 40, "runs_no_claim": 20, "sequential_runs": 8, "block": 40},
    # one process: the flow tests test orchestration, not worker pools (n_jobs byte-identity: tests/canaries,
    # tests/attacks; a pool's start-up in every stage of this micro pipeline cost ~12 CPU s, ~1 min under load)
    "compute": {"shard_trials": 2, "block_trials": 2, "n_jobs": 1},
    "ltu": {"rounds": 50, "n_jobs": 1},
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def micro_params(repo_root: Path, **blocks: Any) -> dict[str, Any]:
    """The repository's params.yaml (every key dvc.yaml lists) with :data:`MICRO_PARAMS` merged in."""
    full = yaml.safe_load((repo_root / "params.yaml").read_text())
    return _merge(_merge(full, MICRO_PARAMS), blocks)


def git_commit(ws: Path) -> None:
    """Commit the workspace (``dvc exp run`` needs a commit to base the experiment on)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "workspace", "--no-gpg-sign"]):
        subprocess.run(cmd, cwd=ws, env=env, check=True, capture_output=True)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One ephemeral Prefect server (SQLite in a temp dir, no network) for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def micro_workspace(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed temp copy of the pipeline with the micro params (nothing reproduced yet)."""
    ws = make_workspace(repo_root, tmp_path_factory.mktemp("flows-ws"), micro_params(repo_root))
    git_commit(ws)
    return ws




@pytest.fixture(scope="session")
def first_audit(prefect_harness: None, micro_workspace: Path) -> Any:
    """The final state of one real audit flow run (``dvc repro`` of the micro pipeline, end to end)."""
    from flows.audit import audit_flow

    return audit_flow(repo=str(micro_workspace), return_state=True)
