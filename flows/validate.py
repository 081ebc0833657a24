"""The data-validation flow: check a new source data drop, start the audit only when it is new and sound.

``validate_flow`` loads the drop with :func:`privaudit.data.sources.load_source` (the same
loader the ``ingest`` stage uses), runs the ``source`` Great Expectations suite
(:func:`privaudit.validation.validate_source`) and then:

- **failed** (a suite expectation, or the loader's own checks: unreadable file, labels out of
  range, duplicate ids): publishes markdown artifact ``privaudit-data-validation`` listing the
  failed expectations and ends **Failed**; no audit is started and the recorded hash is kept;
- **passed, unchanged** (content hash equal to the last validated one): Completed, no audit;
- **passed, changed**: starts the audit with ``force=True`` (the data file is not a DVC
  dependency of ``ingest``, so an unforced ``dvc repro`` would not see the new content) and,
  where the drop's name/path/label column differ from ``params.yaml``, the matching
  ``dataset_*`` overrides; then records the hash. With ``audit_deployment`` set (the served
  deployment, ``flows/deploy.py``) the audit is a run of that deployment (``run_deployment``,
  not waited for); with ``audit_deployment=None`` (the one-shot ``python -m flows.validate``,
  which may run on Prefect's temporary local server, where no deployment exists) it is
  :func:`flows.audit.audit_flow`, run here as a subflow until it ends.

Where the last validated hash lives (decision): a small JSON state file,
``<repo>/.dvc/tmp/privaudit-validated.json`` by default (DVC's git-ignored scratch folder),
keyed by the drop's identity (dataset name, resolved path, label column). A file works the
same with or without a Prefect server (tests, one-off ``python -m flows.validate``) and travels
with the repository it describes; a Prefect Variable would tie the state to one server
database. The hash is recorded only after the audit run was created, so a failed trigger is
retried on the next schedule.

The content hash is SHA-256 over what the pipeline would ingest: X (dtype, shape, bytes),
y, ids and the JSON metadata (less its ``origin``), so a re-saved file with identical content is
"unchanged".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.states import Completed, Failed, State

from flows._dvc import resolve_repo
from flows.audit import audit_flow
from privaudit.artifacts import read_json, write_json
from privaudit.config import FILE_SOURCES
from privaudit.data.sources import DataSourceError, SourceData, load_source
from privaudit.validation import ValidationFailed, validate_source

class DropRejected(ValueError):
    """The data drop failed validation; ``failures`` lists the failed expectations."""

    def __init__(self, message: str, failures: list[str]) -> None:
        super().__init__(message)
        self.failures = failures


AUDIT_DEPLOYMENT = "privaudit-audit/nightly-audit"
STATE_FILE = Path(".dvc") / "tmp" / "privaudit-validated.json"


def _retry_on_os_error(task: Any, task_run: Any, state: State) -> bool:
    """Retry the load only for transient I/O errors, never for a malformed data set."""
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, OSError) and not isinstance(exc, ValueError)


@task(name="load-source", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5, retry_condition_fn=_retry_on_os_error)
def load_drop(name: str, path: str | None, label_column: str | None) -> SourceData:
    """The drop as the ingest stage would load it (I/O: retried on OSError)."""
    return load_source(name, path, label_column)


@task(name="validate-source", cache_policy=NO_CACHE)
def run_expectations(data: SourceData, min_rows: int) -> list[str]:
    """The ``source`` GX suite; returns the failed expectations' descriptions (empty: passed)."""
    try:
        validate_source(data, min_rows=min_rows)
    except ValidationFailed as exc:
        return [f.describe() for f in exc.failures] or [str(exc)]
    return []


def content_hash(data: SourceData) -> str:
    """SHA-256 (hex) of X's dtype/shape/bytes, y, ids and the sorted-key JSON meta (less ``origin``, the file name)."""
    h = hashlib.sha256()
    for arr in (data.X, data.y, data.ids):
        h.update(f"{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())
    meta = {k: v for k, v in data.meta.items() if k != "origin"}
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return h.hexdigest()


def drop_key(name: str, path: str | None, label_column: str | None) -> str:
    """Identity of a drop in the state file: ``name|resolved path|label column``."""
    resolved = str(Path(path).expanduser().resolve()) if path else ""
    return f"{name}|{resolved}|{label_column or ''}"


@task(name="read-validated-state", retries=2, retry_delay_seconds=2)
def read_state(state_file: Path) -> dict[str, Any]:
    """The state file (``{drop key: {sha256, flow_run_id}}``); empty when absent (I/O: retried)."""
    if not state_file.is_file():
        return {}
    try:
        state = read_json(state_file)
    except ValueError as exc:
        raise ValueError(f"state file {state_file}: {exc}; delete it to start over") from exc
    if not isinstance(state, dict):
        raise ValueError(f"state file {state_file} must hold a JSON object, got {type(state).__name__}")
    return state


@task(name="record-validated-hash", retries=2, retry_delay_seconds=2)
def record_state(state_file: Path, state: dict[str, Any]) -> None:
    """Write the state file atomically (I/O: retried)."""
    state_file.parent.mkdir(parents=True, exist_ok=True)
    write_json(state_file, state)


def _repo_path(repo: Path, path: str) -> str:
    """``path`` as params.yaml would hold it: relative to ``repo`` (POSIX) when it lies inside, else absolute. The
    data set's default identity (the release ledger's grouping) names the path, so a drop audited from here and the
    same file set by hand in params.yaml must get the same one (an absolute path made them two identities, whose
    releases were never composed)."""
    full = (repo / Path(path).expanduser()).resolve()
    root = repo.resolve()
    return full.relative_to(root).as_posix() if full.is_relative_to(root) else str(full)


def audit_parameters(repo: Path, name: str, path: str | None, label_column: str | None) -> dict[str, Any]:
    """Parameters of the triggered audit run: ``force=True`` plus the dataset keys that differ from params.yaml."""
    raw = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8")) or {}
    current = raw.get("dataset") or {}
    wanted = {"name": name, "path": _repo_path(repo, path) if path else None, "label_column": label_column}
    overrides = {}
    for key, value in wanted.items():
        have = current.get(key)
        if key == "path" and have:
            have = _repo_path(repo, have)
        if have != value:
            overrides[f"dataset_{key}"] = value
    params: dict[str, Any] = {"repo": str(repo), "force": True}
    if overrides:
        params["overrides"] = overrides
    return params


def failure_markdown(name: str, path: str | None, failures: list[str]) -> str:
    """The failed expectations as a Markdown artifact."""
    lines = [f"# Data validation FAILED: `{name}` at `{path}`", "",
             f"{len(failures)} failed expectation(s); no audit was started.", ""]
    lines += [f"- `{text}`" for text in failures]
    return "\n".join(lines) + "\n"


@flow(name="privaudit-validate-data", log_prints=True)
def validate_flow(
    path: str | None = None,
    dataset_name: str = "csv",
    label_column: str | None = None,
    min_rows: int = 2,
    repo: str | None = None,
    audit_deployment: str | None = AUDIT_DEPLOYMENT,
    state_file: str | None = None,
) -> State:
    """Validate a data drop; start the audit when it passes and its content changed.

    Args:
        path: the drop (``dataset.path``: a CSV, the Location ``.tgz``, an image folder);
            ``None`` for embedded sets (``digits``, ``mnist5k``).
        dataset_name: ``dataset.name`` of the drop (``csv``, ``location``, ``imagefolder``, ...).
        label_column: ``dataset.label_column`` (csv only).
        min_rows: smallest acceptable number of rows.
        repo: the DVC repository the audit runs in (default: this checkout).
        audit_deployment: ``"<flow name>/<deployment name>"`` to start (needs a Prefect server
            where it is registered); ``None``: run the audit flow here, as a subflow, and wait.
        state_file: JSON file with the last validated hashes (default ``<repo>/.dvc/tmp/privaudit-validated.json``).
    """
    logger = get_run_logger()
    root = resolve_repo(repo)
    state_path = Path(state_file) if state_file else root / STATE_FILE
    try:
        data = load_drop(dataset_name, path, label_column)
    except DataSourceError as exc:  # the loader's own checks: a malformed drop, not a flaky disk
        failures = [f"load_source({dataset_name!r}, {path!r}): {exc}"]
    else:
        failures = run_expectations(data, min_rows)
    if failures:
        create_markdown_artifact(failure_markdown(dataset_name, path, failures), key="privaudit-data-validation",
                                 description="failed Great Expectations checks of the data drop")
        message = f"data validation failed ({len(failures)} expectation(s)): " + "; ".join(failures)
        return Failed(message=message, data=DropRejected(message, failures))

    digest = content_hash(data)
    key = drop_key(dataset_name, path, label_column)
    state = read_state(state_path)
    last = (state.get(key) or {}).get("sha256")
    if last == digest:
        logger.info("data drop %s unchanged (sha256 %s); no audit started", key, digest[:12])
        return Completed(message=f"validation passed; data unchanged (sha256 {digest[:12]}); no audit started",
                         data={"sha256": digest, "audit_flow_run_id": None})

    parameters = audit_parameters(root, dataset_name, path, label_column)
    audit_passed: bool | None = None  # unknown: a deployment run is not waited for
    if audit_deployment:
        try:
            run = run_deployment(audit_deployment, parameters=parameters, timeout=0, as_subflow=False)
        except ObjectNotFound:
            message = (f"validation passed, but audit_deployment={audit_deployment!r} is not registered on this "
                       f"Prefect server: register it with `python -m flows.deploy`, or run "
                       f"`python -m flows.validate` without --audit-deployment to audit in this process")
            return Failed(message=message)
        run_id, started = str(run.id), f"started audit flow run {run.id} of {audit_deployment}"
    else:  # the one-shot command: no deployment to look up, the audit runs here
        audit_state = audit_flow(**parameters, return_state=True)
        run_id, audit_passed = str(audit_state.state_details.flow_run_id), audit_state.is_completed()
        started = f"audit flow run {run_id} ran here: {audit_state.name}: {audit_state.message}"
    logger.info("data drop %s changed (sha256 %s → %s); %s", key, (last or "none")[:12], digest[:12], started)
    record_state(state_path, {**state, key: {"sha256": digest, "audit_flow_run_id": run_id}})
    create_markdown_artifact(
        f"# Data validation passed: `{dataset_name}` at `{path}`\n\nContent changed "
        f"(sha256 `{digest[:12]}`); {started}.\n",
        key="privaudit-data-validation", description="data drop validation")
    return Completed(message=f"validation passed; data changed; {started}",
                     data={"sha256": digest, "audit_flow_run_id": run_id, "audit_passed": audit_passed})


def dataset_defaults(repo: Path) -> dict[str, Any]:
    """``path``/``dataset_name``/``label_column`` for the validation flow from ``params.yaml``'s ``dataset`` block."""
    raw = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8")) or {}
    ds = raw.get("dataset") or {}
    path = ds.get("path")
    if path and not Path(path).is_absolute():
        path = str((repo / path).resolve())
    return {"path": path, "dataset_name": ds.get("name", "digits"), "label_column": ds.get("label_column")}


def main(argv: list[str] | None = None) -> int:
    """``python -m flows.validate PATH --dataset-name csv --label-column label``: one run, exit 1 on Failed.

    Without ``--audit-deployment`` a changed, valid drop is audited in this process (no Prefect
    server or deployment needed); exit 1 also when that audit's release gate fails.
    """
    summary = (validate_flow.description or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m flows.validate", description=summary)
    parser.add_argument("path", nargs="?", default=None,
                        help="the drop: a CSV, the Location .tgz, an image folder (default, with no --dataset-name: "
                             "params.yaml's dataset block)")
    parser.add_argument("--dataset-name", default=None,
                        help="dataset.name of the drop (csv, location, imagefolder, digits, mnist5k, ...; "
                             "default: csv with a PATH, else params.yaml's)")
    parser.add_argument("--label-column", default=None, help="dataset.label_column of a csv drop")
    parser.add_argument("--repo", default=None)
    parser.add_argument("--state-file", default=None,
                        help="last validated hashes (default: <repo>/.dvc/tmp/privaudit-validated.json)")
    parser.add_argument("--audit-deployment", default=None,
                        help=f"start this deployment instead of auditing here (needs a Prefect server; the "
                             f"served one is {AUDIT_DEPLOYMENT})")
    args = parser.parse_args(argv)
    if args.path is None and args.dataset_name is None:  # the data set params.yaml audits, as the deployment does
        drop = dataset_defaults(resolve_repo(args.repo))
        args.path, args.dataset_name = drop["path"], drop["dataset_name"]
        args.label_column = args.label_column if args.label_column is not None else drop["label_column"]
    elif args.dataset_name is None:
        args.dataset_name = "csv"
    elif args.path is None and args.dataset_name in FILE_SOURCES:
        parser.error(f"--dataset-name {args.dataset_name} reads a file or folder: give its PATH")
    state = validate_flow(path=args.path, dataset_name=args.dataset_name, label_column=args.label_column,
                          repo=args.repo, audit_deployment=args.audit_deployment, state_file=args.state_file,
                          return_state=True)
    print(state.message)
    if not state.is_completed():
        return 1
    return 1 if state.result().get("audit_passed") is False else 0


if __name__ == "__main__":
    sys.exit(main())
