"""Reading back what a flow run left on the (ephemeral) Prefect server."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    DeploymentFilter,
    DeploymentFilterId,
    TaskRunFilter,
    TaskRunFilterFlowRunId,
)


def artifacts_of(flow_run_id: UUID) -> dict[str, Any]:
    """``{key: artifact}`` of one flow run."""
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


def runs_of_deployment(deployment_id: UUID) -> list[Any]:
    """Every flow run of a deployment."""
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])))


def task_runs_named(flow_run_id: UUID, prefix: str) -> list[Any]:
    """Task runs of one flow run whose name starts with ``prefix``."""
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(task_run_filter=TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[flow_run_id])))
    return [r for r in runs if r.name.startswith(prefix)]


__all__ = ["artifacts_of", "runs_of_deployment", "task_runs_named"]
