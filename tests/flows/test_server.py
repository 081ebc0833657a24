"""A real local Prefect server on a free loopback port: register the deployments, see scheduled runs.

Marked ``server`` (excluded from the default run; ``pytest -m server``). Uses its own
PREFECT_HOME (SQLite database) in a temp dir and never touches the user's profile.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest


pytestmark = pytest.mark.server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_real_server_deployments_have_scheduled_runs(repo_root: Path, micro_workspace: Path, tmp_path: Path) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_UI_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "true"}
    env.pop("PREFECT_API_KEY", None)
    prefect = [sys.executable, "-m", "prefect"]
    server_log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen([*prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: _healthy(api) or server.poll() is not None, 180, "the server to start")
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]

        reg = subprocess.run([sys.executable, "-m", "flows.deploy", "--register-only", "--repo", str(micro_workspace),
                              "--timezone", "Europe/Berlin"], cwd=repo_root, env=env, capture_output=True, text=True,
                             timeout=300)
        assert reg.returncode == 0, reg.stdout + reg.stderr
        print(reg.stdout)

        with httpx.Client(base_url=api, timeout=30) as client:
            deployments = {d["name"]: d for d in client.post("/deployments/filter", json={}).json()}
            assert {"nightly-audit", "hourly-data-validation", "canary-trials-dask"} <= set(deployments)
            limit = client.get("/v2/concurrency_limits/privaudit-dvc").json()
            assert limit["limit"] == 1

            def scheduled() -> dict[str, list[dict[str, Any]]] | None:
                runs = client.post("/flow_runs/filter", json={
                    "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}, "limit": 200}).json()
                by: dict[str, list[dict[str, Any]]] = {}
                for run in runs:
                    by.setdefault(run["deployment_id"], []).append(run)
                audit_id = deployments["nightly-audit"]["id"]
                val_id = deployments["hourly-data-validation"]["id"]
                return by if by.get(audit_id) and by.get(val_id) else None

            by_deployment = wait_for(scheduled, 120, "scheduled runs of both deployments")
            audit_runs = sorted(r["expected_start_time"] for r in by_deployment[deployments["nightly-audit"]["id"]])
            val_runs = sorted(r["expected_start_time"] for r in by_deployment[deployments["hourly-data-validation"]["id"]])
            print("nightly-audit scheduled:", audit_runs[:3])
            print("hourly-data-validation scheduled:", val_runs[:3])
            assert len(val_runs) >= 2  # hourly: several runs ahead
            schedule = deployments["nightly-audit"]["schedules"][0]["schedule"]
            assert schedule["cron"] == "0 2 * * *" and schedule["timezone"] == "Europe/Berlin"
            assert deployments["nightly-audit"]["parameters"] == {"repo": str(micro_workspace), "force": False}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        server_log.close()
    assert server.poll() is not None


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
