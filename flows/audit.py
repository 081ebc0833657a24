"""The audit flow: the DVC pipeline, one run at a time, its verdict as Prefect artifacts.

``audit_flow`` validates ``params.yaml`` (with any overrides) first, then runs ``dvc repro`` —
or ``dvc exp run -S key=value ...`` when overrides are given, so the run is recorded as a DVC
experiment (``dvc exp show``) — and reads ``metrics/gate.json`` (the contract in
docs/architecture.md, "Metrics contracts"), both inside :func:`flows._dvc.exclusive_pipeline`
(global concurrency limit ``privaudit-dvc`` of 1 slot + a file lock). An override run puts
``params.yaml`` back byte for byte afterwards (also when it failed): its overrides apply to that
run only, never to later scheduled audits. Until the next ``dvc repro`` the workspace's outputs
and metrics are then the override run's, and ``privaudit verdict`` says the gate is stale. It
then publishes:

- markdown artifact ``privaudit-verdict``: verdict, per-defender LTU privacy (Pedersen et al.
  2022, Eq. 1) and audited ε̂ (max of Game 3 ``eps_low``, LiDP ``eps_lower_bound`` and
  ``eps_lower_bound_k1``), the gate's reasons;
- table artifact ``privaudit-defenders``: the same per-defender numbers;
- link artifact ``privaudit-report``: ``file://`` URI of ``reports/audit.html``.

The run ends **Failed** when the gate fails; its state message lists the gate's reasons
(``state.result()`` raises :class:`GateFailed`, whose ``summary`` holds the rows).
Only the I/O tasks (reading metrics, publishing artifacts) retry; the pipeline run does not
(a failing stage is deterministic; retrying it only hides the error).

Run once from the repository root: ``python -m flows.audit`` (or ``python -m flows.audit -S ltu.rounds=500``).
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.states import Completed, Failed, State
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows._dvc import (
    check_params,
    exclusive_pipeline,
    resolve_repo,
    restored_file,
    run_dvc,
    set_overrides_args,
)
from privaudit.config import Params
from privaudit.messages import cap
from privaudit.verdict.metrics_files import AuditMetrics, GateResult
from privaudit.verdict.metrics_files import read_gate as read_gate_file
from privaudit.verdict.metrics_files import read_metrics as read_metrics_files


class GateFailed(RuntimeError):
    """The release gate failed; the message lists its reasons, ``summary`` holds the verdict rows."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


#: the top-level blocks of params.yaml, from the params model (a new block is overridable at once)
STAGE_PREFIXES = tuple(Params.model_fields)


class AuditOverrides(BaseModel):
    """Typed ``params.yaml`` overrides of one audit run (``None`` = keep params.yaml's value).

    Each field ``<block>_<key>`` maps to ``dvc exp run -S <block>.<key>=<value>``
    (``ltu_rounds`` → ``ltu.rounds``); ``extra`` takes any other dotted key.
    """

    model_config = ConfigDict(extra="forbid")

    base_seed: int | None = None
    base_device: str | None = Field(None, description="auto | cpu | cuda")
    dataset_name: str | None = None
    dataset_path: str | None = None
    dataset_label_column: str | None = None
    dataset_max_samples: int | None = None
    split_defender_fraction: float | None = None
    featurize_backbone: str | None = None
    ltu_rounds: int | None = None
    game3_canaries: int | Literal["auto"] | None = None
    lidp_trials: int | None = None
    lidp_canaries: int | None = None
    lidp_canary_type: str | None = None
    blackbox_runs: int | None = Field(None, description="the deep black-box audit: models per side of batched "
                                                        "defenders claiming eps (e.g. 10000)")
    blackbox_sequential_runs: int | None = Field(None, description="models per side of other trainers (kind: python)")
    gate_min_privacy: float | None = None
    gate_min_utility: float | None = None
    gate_max_epsilon_excess: float | None = None
    extra: dict[str, str | int | float | bool | None | list[str | int | float | bool]] = Field(
        default_factory=dict, description="other dotted params keys, e.g. {'gate.beta': 0.01} (the audit's error budget)"
    )

    def as_dotted(self) -> dict[str, Any]:
        """The set overrides as ``{"block.key": value}``."""
        dotted: dict[str, Any] = {}
        for name, value in self.model_dump(exclude={"extra"}).items():
            if value is not None:
                block, key = name.split("_", 1)
                dotted[f"{block}.{key}"] = value
        for key, value in self.extra.items():
            if key.split(".", 1)[0] not in STAGE_PREFIXES or "." not in key:
                raise ValueError(f"override key {key!r} must be '<block>.<key>' with block in {list(STAGE_PREFIXES)}")
            dotted[key] = value
        return dotted


@task(name="check-params")
def check_params_task(repo: Path, overrides: dict[str, Any]) -> None:
    """Validate params.yaml + overrides before any pipeline work (no retries: deterministic)."""
    check_params(repo, overrides)


@task(name="dvc-pipeline", retries=0)
def run_pipeline(repo: Path, overrides: dict[str, Any], force: bool, timeout_s: float) -> str:
    """``dvc repro`` (or ``dvc exp run -S ...``); the caller holds the pipeline lock."""
    logger = get_run_logger()
    args = (["exp", "run", *set_overrides_args(overrides)] if overrides else ["repro"]) + (["--force"] if force else [])
    logger.info("running dvc %s in %s", " ".join(args), repo)
    # the stages' own lines (the plan, a line per finished shard with rate and ETA) reach the run's log as they come
    out = run_dvc(repo, args, timeout_s, on_line=lambda line: logger.info("%s", line) if line.strip() else None)
    ran = [line for line in out.splitlines() if line.startswith("Running stage")]
    logger.info("dvc: %s", "; ".join(ran) or "nothing to reproduce (all stages up to date)")
    return out


@task(name="read-gate", retries=2, retry_delay_seconds=2)
def read_gate(repo: Path) -> GateResult:
    """``metrics/gate.json``, typed (I/O: retried)."""
    return read_gate_file(repo / "metrics" / "gate.json")


@task(name="read-metrics", retries=2, retry_delay_seconds=2)
def read_metrics(repo: Path) -> AuditMetrics:
    """``metrics/ltu.json``, ``audit.json`` and ``bounds.json``, typed; a missing one is empty (I/O: retried)."""
    folder = repo / "metrics"
    return read_metrics_files(folder / "ltu.json", folder / "audit.json", folder / "bounds.json", missing_ok=True)


def _num(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def defender_rows(gate: GateResult, metrics: AuditMetrics) -> list[dict[str, Any]]:
    """One row per defender, as ``privaudit verdict`` and the report's first screen show it: the state (``PASS``,
    ``PASS (no DP claim)``, ``FAIL``, ``NOT AUDITED``), LTU privacy ± stderr, utility, claimed ε, and ε̂ — for a
    claiming defender its strongest gated bound against the claim, for another its largest gated bound — with the
    audit it came from. (The table showed Game 3 and LiDP only, and the ungated LiDP K = 1 view, so its ε̂ was not
    the gate's: 0.000 where the verdict said 0.958.)"""
    from privaudit.report.first_screen import defender_state, largest_gated_bound, state_label, strongest_bound
    from privaudit.verdict.gate import NOT_AUDITED

    rows = []
    for name, verdict in gate.defenders.items():
        ltu = metrics.ltu.get(name)
        audit = metrics.audit.get(name)
        state = defender_state(audit, verdict, any(NOT_AUDITED in r for r in verdict.reasons))
        strongest = strongest_bound(audit)
        shown = ((strongest.epsilon, strongest.label) if strongest is not None
                 else largest_gated_bound(audit) if audit is not None and audit.claim is None else None)
        rows.append({
            "defender": name,
            "gate": state_label(state),
            "privacy": _num(ltu.privacy) if ltu else None,
            "privacy_stderr": _num(ltu.privacy_stderr) if ltu else None,
            "utility": _num(ltu.utility) if ltu else None,
            "claimed_epsilon": _num(audit.claimed_epsilon) if audit else None,
            "epsilon_hat": shown[0] if shown is not None else None,
            "epsilon_hat_audit": shown[1] if shown is not None else None,
            "reasons": "; ".join(verdict.reasons),
        })
    return rows


def _fmt(value: Any, digits: int = 3) -> str:
    return "—" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def _eps_cell(row: dict[str, Any]) -> str:
    """ε̂ and the audit it came from, e.g. ``0.958 (white-box DP-SGD audit)``."""
    audit = row.get("epsilon_hat_audit")
    return _fmt(row["epsilon_hat"]) + (f" ({audit})" if audit else "")


def summary_markdown(gate: GateResult, rows: list[dict[str, Any]], report: Path) -> str:
    """The verdict as Markdown: headline, per-defender table, the gate's reasons."""
    lines = [f"# privaudit verdict: **{'PASS' if gate.passed else 'FAIL'}**", "",
             "| defender | gate | LTU privacy (Eq. 1) | utility (Eq. 2) | claimed ε | audited ε̂ |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        priv = _fmt(r["privacy"]) + (f" ± {_fmt(r['privacy_stderr'])}" if r["privacy_stderr"] is not None else "")
        lines.append(f"| {r['defender']} | {r['gate']} | {priv} | {_fmt(r['utility'])} | "
                     f"{_fmt(r['claimed_epsilon'])} | {_eps_cell(r)} |")
    lines += ["", "ε̂ = with a claim, the strongest gated ε lower bound against it (as `privaudit verdict` shows it); "
              "without one, the largest gated ε lower bound (evidence of leakage, nothing to refute)."]
    if gate.reasons:
        lines += ["", "## Reasons", ""] + [f"- {reason}" for reason in gate.reasons]
    lines += ["", f"Report: `{report}`"]
    return "\n".join(lines) + "\n"


@task(name="publish-artifacts", retries=2, retry_delay_seconds=2)
def publish_artifacts(gate: GateResult, rows: list[dict[str, Any]], report: Path) -> None:
    """Markdown summary, table and report link artifacts (API calls: retried)."""
    create_markdown_artifact(summary_markdown(gate, rows, report), key="privaudit-verdict",
                             description="privaudit release-gate verdict")
    create_table_artifact(rows, key="privaudit-defenders", description="per-defender privacy, utility and audited ε̂")
    create_link_artifact(report.resolve().as_uri(), link_text=f"audit report ({report.name})",
                         key="privaudit-report", description=str(report.resolve()))


def gate_failure_message(gate: GateResult) -> str:
    """``release gate failed: <reason>; <reason>`` (falls back to the failing defenders' names)."""
    reasons = list(gate.reasons) or [f"{n}: failed" for n, v in gate.defenders.items() if not v.passed]
    return "release gate failed: " + "; ".join(reasons)


@flow(name="privaudit-audit", log_prints=True)
def audit_flow(
    repo: str | None = None,
    overrides: AuditOverrides | None = None,
    force: bool = False,
    timeout_s: float = 6 * 3600,
) -> State:
    """Run the audit pipeline and publish its verdict; Failed when the release gate fails.

    Args:
        repo: the DVC repository (default: the checkout holding this file).
        overrides: typed params overrides; any set → ``dvc exp run -S ...`` instead of ``dvc repro``.
        force: rerun every stage (``--force``), e.g. after a new data drop at an unchanged
            ``dataset.path`` (the data file itself is not a DVC dependency of ``ingest``).
        timeout_s: longest wait for the pipeline lock, and longest pipeline run.
    """
    root = resolve_repo(repo)
    dotted = (overrides or AuditOverrides()).as_dotted()
    check_params_task(root, dotted)
    keep_params = restored_file(root / "params.yaml") if dotted else nullcontext()
    with exclusive_pipeline(root, timeout_s):  # held until the metrics are read: no other run rewrites them
        with keep_params:  # `dvc exp run -S` writes the overrides into params.yaml: put it back
            run_pipeline(root, dotted, force, timeout_s)
            gate = read_gate(root)
            metrics = read_metrics(root)
    rows = defender_rows(gate, metrics)
    report = root / "reports" / "audit.html"
    publish_artifacts(gate, rows, report)
    result = {"passed": gate.passed, "reasons": list(gate.reasons), "defenders": rows, "report": str(report)}
    if not gate.passed:
        message = gate_failure_message(gate)
        return Failed(message=message, data=GateFailed(message, result))
    return Completed(message="release gate passed", data=result)


def main(argv: list[str] | None = None) -> int:
    """``python -m flows.audit [--repo R] [--force] [--set key=value ...]``: one run, exit 1 on Failed."""
    import yaml

    summary = (audit_flow.description or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m flows.audit", description=summary)
    parser.add_argument("--repo", default=None)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--set", "-S", action="append", default=[], metavar="KEY=VALUE", help="params override")
    args = parser.parse_args(argv)
    extra = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item!r}: expected KEY=VALUE")
        extra[key] = yaml.safe_load(value)
    try:  # refused here, in one line, before a Prefect server starts (it was two tracebacks after one)
        overrides = AuditOverrides(extra=extra)
        check_params(resolve_repo(args.repo), overrides.as_dotted())
    except ValidationError as exc:  # a value of no accepted type (a mapping): one line per key, not per union member
        keys = dict.fromkeys(str(e["loc"][1]) for e in exc.errors() if len(e["loc"]) > 1)
        problems = "; ".join(f"--set {k}={cap(repr(extra.get(k)), 80)}: a value is a number, a string, true/false, "
                             "null or a list of those" for k in keys) or str(exc).splitlines()[0]
        print(f"python -m flows.audit: error: {cap(problems)}", file=sys.stderr)
        return 2
    except ValueError as exc:  # ParamsError: names the key and what is allowed
        print(f"python -m flows.audit: error: {cap(str(exc))}", file=sys.stderr)
        return 2
    state = audit_flow(repo=args.repo, overrides=overrides, force=args.force, return_state=True)
    print(state.message)
    return 0 if state.is_completed() else 1


if __name__ == "__main__":
    sys.exit(main())
