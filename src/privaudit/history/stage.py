"""What the ``history`` stage does: record this run, find regressions, write ``reports/history.html``.

:func:`run_history` is the whole stage (``stages/history.py`` only parses its arguments). It runs last on
every ``dvc repro`` (``always_changed``; no DVC outputs, so ``dvc.lock`` stays the same when nothing
changed), also under ``make audit``, ``dvc exp run`` and the Prefect flows, which run ``dvc repro``:

1. read the gate (``metrics/gate.json``) and the metrics it was computed from with the typed readers
   (:mod:`privaudit.verdict.metrics_files`), the package versions (``data/environment.json``), the users'
   trainer hashes (``data/user_code.json``) and the data digest (the ingest stage's stamp, :class:`HistoryPlan`);
2. build one :class:`~privaudit.history.records.AuditRecord` and append it to ``refs/privaudit/history``
   (:class:`~privaudit.history.store.HistoryStore`);
3. read the whole history, flag regressions (:mod:`privaudit.history.regression`) and write
   ``reports/history.html`` (git-ignored, not a DVC output: it grows with every run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from privaudit.artifacts import atomic_file, read_json
from privaudit.history.page import render_history
from privaudit.history.records import AuditRecord, DataRecord, defender_records
from privaudit.history.regression import Regression, find_regressions
from privaudit.history.store import HistoryStore
from privaudit.history.workspace import changed_code_files, code_sha256, commit_and_dirty, params_hashes
from privaudit.repro.environment import environment_manifest
from privaudit.repro.provenance import canonical_sha256
from privaudit.verdict.metrics_files import read_gate, read_metrics

__all__ = ["TRIGGER_ENV", "HistoryPaths", "HistoryPlan", "build_record", "run_history", "trigger_of"]

#: the environment variable that names what started the run (the Prefect flows and ``make audit`` set it)
TRIGGER_ENV = "PRIVAUDIT_TRIGGER"


def trigger_of(env: Mapping[str, str]) -> str:
    """``PRIVAUDIT_TRIGGER`` when set (e.g. ``prefect deployment privaudit-audit/nightly-audit``), else
    ``dvc exp run`` inside an experiment, else ``dvc repro``."""
    if env.get(TRIGGER_ENV, "").strip():
        return env[TRIGGER_ENV].strip()
    if env.get("DVC_EXP_BASELINE_REV") or env.get("DVC_EXP_NAME"):
        return "dvc exp run"
    return "dvc repro"


@dataclass(frozen=True)
class HistoryPaths:
    """Inputs and output of the history stage (the defaults are the pipeline's paths)."""

    gate: Path = Path("metrics/gate.json")
    ltu: Path = Path("metrics/ltu.json")
    audit: Path = Path("metrics/audit.json")
    bounds: Path = Path("metrics/bounds.json")
    environment: Path = Path("data/environment.json")
    user_code: Path = Path("data/user_code.json")
    out: Path = Path("reports/history.html")
    repo: Path = Path(".")


class ParamsLike(Protocol):
    """What :meth:`HistoryPlan.of` reads of the params (:class:`privaudit.config.Params` is one)."""

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class HistoryPlan:
    """What the history stage is given: the data set's identity and digest as the ingest stage stamped them
    (:func:`privaudit.data.sources.read_source_stamp`, read by the stage; the digest ``None`` where the ingested
    data carries no stamp) and the params as JSON."""

    identity: str
    digest: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, params: ParamsLike, identity: str, digest: str | None) -> "HistoryPlan":
        return cls(identity=identity, digest=digest, params=params.model_dump(mode="json"))


def build_record(paths: HistoryPaths, plan: HistoryPlan, trigger: str, when: datetime) -> AuditRecord:
    """This run's record from the files of ``paths`` (see the module doc)."""
    gate = read_gate(paths.gate)
    metrics = read_metrics(paths.ltu, paths.audit, paths.bounds, missing_ok=True)
    env = read_json(paths.environment) if paths.environment.is_file() else environment_manifest()
    user: Any = read_json(paths.user_code) if paths.user_code.is_file() else {}
    commit, dirty = commit_and_dirty(paths.repo)
    params_sha, blocks = params_hashes(plan.params)
    return AuditRecord(
        when=when, trigger=trigger, commit=commit, dirty=dirty,
        data=DataRecord(identity=plan.identity, digest=plan.digest),
        python=env.get("python"), packages=env.get("packages") or {},
        params_sha256=params_sha, params_blocks=blocks, code_sha256=code_sha256(paths.repo),
        user_code={str(k): canonical_sha256(v) for k, v in user.items()} if isinstance(user, dict) else {},
        passed=gate.passed, defenders=defender_records(metrics, gate))


def run_history(paths: HistoryPaths, plan: HistoryPlan, trigger: str | None = None,
                when: datetime | None = None) -> tuple[AuditRecord, list[Regression]]:
    """Append this run's record, write the history page; returns the record and the regressions of this run.

    Raises:
        privaudit.history.store.HistoryError: not a git repository (the message names the fix), or git failed.
        ValueError: a metrics file or a history line is corrupt (named).
    """
    store = HistoryStore(paths.repo)  # outside git: refused before anything is read
    record = build_record(paths, plan, trigger or trigger_of(os.environ), when or datetime.now(timezone.utc))
    store.append(record)
    records = store.read()
    regressions = find_regressions(records, changed_files=changed_code_files(paths.repo))
    paths.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(paths.out, "wb") as fh:
        os.fchmod(fh.fileno(), 0o644)  # readable by all, as the audit report (it is meant to be shared)
        fh.write(render_history(records, regressions).encode("utf-8"))
    return record, [g for g in regressions if g.record == len(records) - 1]
