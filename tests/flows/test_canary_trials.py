"""The canary-trials flow: shards on a Dask cluster give the very arrays the canaries stage computed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import flows.canary_trials as ct
from flows.audit import GateFailed
from flows.canary_trials import canary_trials_flow, make_task_runner, scheduler_address
from privaudit.canaries.plan import CanaryPlan
from privaudit.canaries.shards import DEFAULT_SHARD_ROOT, plan_shards, shard_dir
from privaudit.config import load_params, parse_params

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _params(ws: Path, scheduler: str = "local") -> Any:
    raw = yaml.safe_load((ws / "params.yaml").read_text())
    raw["compute"]["scheduler"] = scheduler
    return parse_params(raw)


def test_scheduler_address_precedence(micro_workspace: Path) -> None:
    local, remote = _params(micro_workspace), _params(micro_workspace, "tcp://10.0.0.5:8786")
    assert scheduler_address(None, local) is None  # → LocalCluster
    assert scheduler_address(None, remote) == "tcp://10.0.0.5:8786"  # compute.scheduler
    assert scheduler_address("tcp://h:1", remote) == "tcp://h:1"  # the flow parameter wins
    assert scheduler_address("local", remote) is None


def test_task_runner_targets() -> None:
    assert make_task_runner("tcp://h:8786", 4, True).address == "tcp://h:8786"
    runner = make_task_runner(None, 3, False)
    assert runner.address is None
    assert runner.cluster_kwargs == {"n_workers": 3, "threads_per_worker": 1, "processes": False, "dashboard_address": None}


def _arrays(directory: Path) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for f in sorted(directory.rglob("*.npz")):
        with np.load(f, allow_pickle=False) as z:
            out[str(f.relative_to(directory))] = {k: z[k] for k in z.files}
    return out


@pytest.mark.slow  # a LocalCluster recomputing every shard after the real end-to-end run
def test_shards_on_an_existing_dask_cluster_match_the_stage(micro_workspace: Path, first_audit: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Delete the shards the canaries stage left; recompute them on Dask; identical arrays come back."""
    from distributed import LocalCluster

    ws = micro_workspace
    params = CanaryPlan.of(load_params(ws / "params.yaml"))
    store = shard_dir(ws / DEFAULT_SHARD_ROOT, params)
    before = _arrays(store)
    assert len(before) == len(plan_shards(params)) >= 3  # game3 + 2 lidp shards of 2 trials
    shutil.rmtree(store)

    dvc_calls: list[list[str]] = []
    logged: list[bool] = []
    real = ct.run_dvc

    def recorded(repo: Path, args: list[str], t: float | None = None, on_line: Any = None) -> str:
        dvc_calls.append(args)
        logged.append(on_line is not None)  # the stages' lines reach the run's log (they showed nothing)
        return real(repo, args, t, on_line=on_line)

    monkeypatch.setattr(ct, "run_dvc", recorded)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        state = canary_trials_flow(repo=str(ws), dask_address=cluster.scheduler_address, device="cpu",
                                   return_state=True)

    assert state.type == first_audit.type, state.message  # same gate verdict as the audit flow's run
    result = state.result(raise_on_failure=False)
    summary = result.summary if isinstance(result, GateFailed) else result
    assert len(summary["shards"]) == len(before)
    assert dvc_calls == [["repro", "plan"], ["repro"]] and logged == [True, True]
    after = _arrays(store)
    assert after.keys() == before.keys()
    for name, arrays in before.items():
        assert arrays.keys() == after[name].keys()
        for key, value in arrays.items():
            np.testing.assert_array_equal(after[name][key], value, err_msg=f"{name}:{key}")

    # everything finished → nothing submitted the second time
    monkeypatch.setattr(ct, "shards_flow", lambda *a, **k: pytest.fail("no shard should be recomputed"))
    again = canary_trials_flow(repo=str(ws), dask_address="tcp://127.0.0.1:1", run_pipeline=False, return_state=True)
    assert again.is_completed() and again.result()["shards"] == []
