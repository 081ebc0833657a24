"""Deployments as code: a nightly audit and an hourly data validation, served by this process.

Decision: ``serve`` (a long-running Python process that registers the deployments, keeps their
schedules and runs their flow runs as subprocesses) instead of ``prefect.yaml`` + a work pool
and worker. It needs nothing but a Prefect server: no work pool, no pull step, no storage
block, no image, so it works offline on a fresh machine from a plain checkout.

    python -m flows.deploy                    # register + serve (Ctrl-C stops; schedules pause)
    python -m flows.deploy --register-only    # register deployments + concurrency limit, exit

Deployments (flow name / deployment name):

- ``privaudit-audit/nightly-audit``: cron ``--audit-cron`` (default ``0 2 * * *``, 02:00) in
  ``--timezone`` (default ``UTC``); parameters ``repo``, ``force=False`` (and, with ``--blackbox-runs N``,
  ``overrides={"blackbox_runs": N}``: the deep black-box audit every night); deployment
  concurrency limit 1 (further runs wait in the queue, ``ENQUEUE``);
- ``privaudit-validate-data/hourly-data-validation``: cron ``--validate-cron`` (default
  ``0 * * * *``) in the same timezone; parameters ``path``/``dataset_name``/``label_column``
  (default: the ``dataset`` block of ``params.yaml``) and ``audit_deployment``;
- ``privaudit-canary-trials/canary-trials-dask`` (no schedule; start it by hand or from the UI).

It also creates (or updates) the global concurrency limit ``privaudit-dvc`` with 1 slot, which
every flow that runs ``dvc`` holds for the length of the run (see ``flows/_dvc.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from prefect import serve
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron

from flows._dvc import DVC_CONCURRENCY_LIMIT, resolve_repo
from flows.audit import audit_flow
from flows.canary_trials import canary_trials_flow
from flows.validate import dataset_defaults, validate_flow

AUDIT_DEPLOYMENT_NAME = "nightly-audit"
VALIDATE_DEPLOYMENT_NAME = "hourly-data-validation"
CANARY_DEPLOYMENT_NAME = "canary-trials-dask"
DEFAULT_AUDIT_CRON = "0 2 * * *"
DEFAULT_VALIDATE_CRON = "0 * * * *"
DEFAULT_TIMEZONE = "UTC"
TAGS = ["privaudit"]


def build_deployments(
    repo: Path,
    timezone: str = DEFAULT_TIMEZONE,
    audit_cron: str = DEFAULT_AUDIT_CRON,
    validate_cron: str = DEFAULT_VALIDATE_CRON,
    drop: dict[str, Any] | None = None,
    blackbox_runs: int | None = None,
) -> list[RunnerDeployment]:
    """The three deployments (nightly audit, hourly validation, unscheduled Dask canary trials).

    ``blackbox_runs``: the nightly audit runs the deep black-box audit (``blackbox.runs`` models per side,
    as ``dvc exp run -S blackbox.runs=N``); ``None`` keeps ``params.yaml``'s value."""
    drop = drop if drop is not None else dataset_defaults(repo)
    nightly: dict[str, Any] = {"repo": str(repo), "force": False}
    if blackbox_runs is not None:
        nightly["overrides"] = {"blackbox_runs": int(blackbox_runs)}
    audit = audit_flow.to_deployment(
        name=AUDIT_DEPLOYMENT_NAME,
        schedules=[Cron(audit_cron, timezone=timezone)],
        parameters=nightly,
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
        tags=TAGS,
        description="Nightly privaudit audit: dvc repro, release gate, artifacts.",
    )
    validate = validate_flow.to_deployment(
        name=VALIDATE_DEPLOYMENT_NAME,
        schedules=[Cron(validate_cron, timezone=timezone)],
        parameters={**drop, "repo": str(repo), "audit_deployment": f"{audit_flow.name}/{AUDIT_DEPLOYMENT_NAME}"},
        concurrency_limit=1,
        tags=TAGS,
        description="Hourly check of the data drop; starts the audit when it passed and changed.",
    )
    canary = canary_trials_flow.to_deployment(
        name=CANARY_DEPLOYMENT_NAME,
        parameters={"repo": str(repo)},
        concurrency_limit=1,
        tags=TAGS,
        description="Canary trial shards on a Dask cluster (parameter dask_address), then dvc repro.",
    )
    return [audit, validate, canary]


def ensure_concurrency_limit() -> None:
    """Create/update the global concurrency limit ``privaudit-dvc`` (1 slot)."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(DVC_CONCURRENCY_LIMIT, 1)


def main(argv: list[str] | None = None) -> int:
    """Register the deployments (and the concurrency limit); serve them unless ``--register-only``."""
    parser = argparse.ArgumentParser(prog="python -m flows.deploy", description=__doc__.split("\n")[0])
    parser.add_argument("--repo", default=None, help="DVC repository the flows run in (default: this checkout)")
    parser.add_argument("--timezone", default=DEFAULT_TIMEZONE, help="IANA timezone of the cron schedules")
    parser.add_argument("--audit-cron", default=DEFAULT_AUDIT_CRON)
    parser.add_argument("--validate-cron", default=DEFAULT_VALIDATE_CRON)
    parser.add_argument("--drop-path", default=None, help="data drop to validate (default: params.yaml dataset.path)")
    parser.add_argument("--dataset-name", default=None, help="dataset.name of the drop (default: params.yaml)")
    parser.add_argument("--label-column", default=None, help="dataset.label_column of the drop (csv)")
    parser.add_argument("--blackbox-runs", type=int, default=None,
                        help="nightly audit only: the deep black-box audit, blackbox.runs models per side (e.g. 10000)")
    parser.add_argument("--register-only", action="store_true", help="register and exit, do not serve")
    args = parser.parse_args(argv)

    repo = resolve_repo(args.repo)
    drop = dataset_defaults(repo)
    if args.drop_path is not None:
        drop["path"] = str(Path(args.drop_path).expanduser().resolve())
    if args.dataset_name is not None:
        drop["dataset_name"] = args.dataset_name
    if args.label_column is not None:
        drop["label_column"] = args.label_column
    deployments = build_deployments(repo, args.timezone, args.audit_cron, args.validate_cron, drop, args.blackbox_runs)
    ensure_concurrency_limit()
    if args.register_only:
        for deployment in deployments:
            deployment_id = deployment.apply()
            print(f"registered {deployment.flow_name}/{deployment.name} ({deployment_id})")
        return 0
    serve(*deployments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
