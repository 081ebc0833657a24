"""One audit run, typed: :class:`AuditRecord`, a line of the history (``refs/privaudit/history``).

A record holds what a reader of the history needs to compare two runs without the workspace they ran in:

- *when* (UTC), the *trigger* (``dvc repro``, ``make audit``, a Prefect deployment or flow run; the
  ``PRIVAUDIT_TRIGGER`` environment variable, see :func:`privaudit.history.stage.trigger_of`), the git
  *commit* of the workspace and whether its audited code was *dirty*;
- the data set's *identity* and *digest*, the result packages' versions (``data/environment.json``), a hash
  of the params (and one per top-level params block, so a change can be named), of the users' trainer files
  (``data/user_code.json``, per defender) and of the tracked code (``src/``, ``stages/``, ``dvc.yaml``);
- per defender (:class:`DefenderRecord`): the gate's verdict, the claim, every **gated** ε lower bound with
  its audit, its confidence level and the ε it could have detected (:class:`GatedEpsilon`), and the strongest
  LTU attacker's privacy and utility (test accuracy, Pedersen et al. 2022 Eq. 2).

The records are built from the typed metrics readers (:mod:`privaudit.verdict.metrics_files`), never
from raw JSON.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from privaudit.verdict.gate import NOT_AUDITED
from privaudit.verdict.metrics_files import AuditEntry, AuditMetrics, GateResult
from privaudit.claims.registry import EPSILON_BOUNDS

__all__ = ["RECORD_VERSION", "AuditRecord", "DataRecord", "DefenderRecord", "GatedEpsilon", "Verdict",
           "defender_records", "gated_epsilons", "verdict_word"]

#: the schema version of a record line (a reader refuses a newer one, naming it)
RECORD_VERSION = 1

Verdict = Literal["PASS", "FAIL", "NOT AUDITED"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _finite(value: float | None) -> float | None:
    """A finite float, else ``None`` (JSON has no inf/NaN: an infinite ε̂ is recorded as absent)."""
    return float(value) if value is not None and math.isfinite(value) else None


class GatedEpsilon(_Frozen):
    """One gated ε lower bound of a defender: bound kind (``gate.bounds``), the audit and key that gave it,
    its value, the level it holds at (its share of ``gate.beta``), its δ, and the smallest ε that audit could
    have detected (``detectable_epsilon``; ``None`` where the audit does not compute one)."""

    kind: str
    audit: str
    source: str
    epsilon: float
    level: float | None = None
    delta: float | None = None
    detectable_epsilon: float | None = None


class DefenderRecord(_Frozen):
    """One defender of one run: verdict, claim, gated ε̂, LTU privacy and utility."""

    verdict: Verdict
    reasons: int = Field(ge=0)
    claimed_epsilon: float | None = None
    claimed_delta: float | None = None
    eps_hat: tuple[GatedEpsilon, ...] = ()
    privacy: float | None = None
    utility: float | None = None
    utility_stderr: float | None = None

    def bound(self, kind: str) -> GatedEpsilon | None:
        """The gated bound of kind ``kind`` (``None``: not recorded in this run)."""
        return next((b for b in self.eps_hat if b.kind == kind), None)


class DataRecord(_Frozen):
    """The audited data set: the identity its releases are grouped by, and a digest of its content."""

    identity: str
    digest: str | None = None


class AuditRecord(_Frozen):
    """One audit run (see the module doc); one JSON line of the history file."""

    version: int = RECORD_VERSION
    when: datetime
    trigger: str
    commit: str | None = None
    dirty: bool | None = None
    data: DataRecord
    python: str | None = None
    packages: dict[str, str | None] = Field(default_factory=dict)
    params_sha256: str
    params_blocks: dict[str, str] = Field(default_factory=dict)
    code_sha256: str | None = None
    user_code: dict[str, str] = Field(default_factory=dict)
    passed: bool
    defenders: dict[str, DefenderRecord] = Field(default_factory=dict)

    @field_validator("when")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("must carry a time zone (records are in UTC)")
        return value.astimezone(timezone.utc)

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > RECORD_VERSION:
            raise ValueError(f"record version {value} is newer than this privaudit reads ({RECORD_VERSION}); "
                             "upgrade privaudit")
        return value

    def to_line(self) -> str:
        """The record as one JSON line (sorted keys, no newline inside, a newline at the end)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":")) + "\n"

    @classmethod
    def from_line(cls, line: str, where: str) -> "AuditRecord":
        """Parse one line (``ValueError`` naming ``where``, e.g. ``refs/privaudit/history:history.jsonl:3``)."""
        from pydantic import ValidationError

        try:
            return cls.model_validate_json(line)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {loc}: {first['msg']}") from None


def verdict_word(passed: bool, reasons: tuple[str, ...]) -> Verdict:
    """``PASS``, ``NOT AUDITED`` (a reason carries :data:`privaudit.verdict.gate.NOT_AUDITED`) or ``FAIL``."""
    if passed:
        return "PASS"
    return "NOT AUDITED" if any(NOT_AUDITED in r for r in reasons) else "FAIL"


def _gated_kinds(entry: AuditEntry) -> set[str]:
    """The kinds the gate compared: ``budget.gated`` (ε bounds only), or every ε bound of an older file."""
    if entry.budget is None:
        return set(EPSILON_BOUNDS)
    return set(entry.budget.gated) & set(EPSILON_BOUNDS)


def gated_epsilons(entry: AuditEntry) -> tuple[GatedEpsilon, ...]:
    """Every gated, finite ε lower bound of one ``metrics/audit.json`` entry, in registry order."""
    gated = _gated_kinds(entry)
    levels = entry.budget.levels if entry.budget is not None else {}
    out = []
    for kind, source, block, eps in entry.epsilon_lower_bounds():
        if kind not in gated or _finite(eps) is None:
            continue
        detectable: Any = (block.model_extra or {}).get("detectable_epsilon")
        detectable = detectable if isinstance(detectable, (int, float)) and not isinstance(detectable, bool) else None
        level = levels.get(kind, block.level)
        out.append(GatedEpsilon(kind=kind, audit=source.split(".")[0], source=source, epsilon=eps,
                                level=_finite(level), delta=_finite(block.delta), detectable_epsilon=_finite(detectable)))
    return tuple(out)


def defender_records(metrics: AuditMetrics, gate: GateResult) -> dict[str, DefenderRecord]:
    """Per defender of the gate (in its order): verdict, claim, gated ε̂ and LTU numbers of one run."""
    out: dict[str, DefenderRecord] = {}
    for name, verdict in gate.defenders.items():
        audit, ltu = metrics.audit.get(name), metrics.ltu.get(name)
        out[name] = DefenderRecord(
            verdict=verdict_word(verdict.passed, verdict.reasons),
            reasons=len(verdict.reasons),
            claimed_epsilon=None if audit is None else _finite(audit.claimed_epsilon),
            claimed_delta=None if audit is None else _finite(audit.claimed_delta),
            eps_hat=() if audit is None else gated_epsilons(audit),
            privacy=None if ltu is None else _finite(ltu.privacy),
            utility=None if ltu is None else _finite(ltu.utility),
            utility_stderr=None if ltu is None else _finite(ltu.utility_stderr),
        )
    return out
