"""The ledger of releases: ``releases.yaml`` at the repository root, one entry per model released.

What a person in a data set has lost is the composition of every release trained on their record, not the ε
of the latest model. The ledger lists those releases, grouped by the data set's *identity* (the people, a name
the user chooses: ``dataset.identity``, by default the data source), so that the release gate can compose
every earlier release with a new candidate (``gate.total_budget``, :mod:`privaudit.verdict.total_budget`).
It is a git-tracked file, versioned with the audits that passed each release.

An entry (:class:`Release`)::

    - name: dpsgd_eps1-3f2c1a9b0d4e
      defender: dpsgd_eps1
      date: '2026-05-04T09:12:44Z'
      dataset: {identity: digits, digest: <sha256 of the stored arrays, data/source/meta.json>}
      claim: {epsilon: 1.0, delta: 1.0e-05, neighbourhood: add_remove, mechanism: {kind: subsampled_gaussian, ...}}
      audit: {commit: <the git commit of the audit files>, gate_hash: <sha256 of metrics/gate.json>,
              model_sha256: <sha256 of the released model file>}

:func:`read_ledger` validates the whole file (an error names the file and the key); :func:`append_release`
appends one entry under an exclusive lock and replaces the file atomically
(:func:`privaudit.artifacts.atomic_file`), keeping its comment header. ``privaudit release <defender>``
(:mod:`privaudit.cli`) is the command that appends.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator, model_validator

from privaudit.artifacts import atomic_file
from privaudit.claims.mechanisms import DeclaredMechanism
from privaudit.claims.neighbourhood import Neighbourhood

__all__ = ["LEDGER_FILE", "LEDGER_HEADER", "LEDGER_VERSION", "Ledger", "LedgerAudit", "LedgerClaim", "LedgerDataset",
           "LedgerError", "Release", "append_release", "dump_ledger", "read_ledger"]

#: where the ledger lives, relative to the repository root
LEDGER_FILE = Path("releases.yaml")
LEDGER_VERSION = 1

#: the comment header of a new ledger (an existing file keeps its own)
LEDGER_HEADER = """\
# The ledger of releases (privaudit, docs/howto/release-ledger.md). Commit it with the audits.
#
# One entry per released model, appended by `privaudit release <defender>` after a fresh PASS of the
# release gate: name, defender, date (UTC), the data set (its identity -- the people it holds, params key
# dataset.identity -- and the digest of the stored arrays), the DP claim released (epsilon, delta,
# neighbourhood, mechanism) and the audit that passed it (git commit, sha256 of metrics/gate.json).
# With gate.total_budget set, the release gate composes every release below that has the same
# dataset identity with each new candidate and fails a candidate that would exceed the budget.
# Do not edit entries by hand: a release that happened stays in the ledger.
"""

_HEX40 = r"^[0-9a-f]{40}([0-9a-f]{24})?$"  # a git commit id (SHA-1, or SHA-256 repositories)
_HEX64 = r"^[0-9a-f]{64}$"


class LedgerError(ValueError):
    """``releases.yaml`` is malformed or an append is refused; the message names the file, key and fix."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerDataset(_Frozen):
    """The data a release was trained on: ``identity`` (the people; releases are composed by it) and
    ``digest`` (sha256 of the stored arrays, as the ingest stage records it: what exactly was used)."""

    identity: str = Field(min_length=1)
    digest: str = Field(pattern=_HEX64)


class LedgerClaim(_Frozen):
    """The DP claim released: the point (ε, δ) for ``neighbourhood`` and the mechanism, when one is declared."""

    epsilon: float = Field(ge=0.0)
    delta: float = Field(ge=0.0, lt=1.0)
    neighbourhood: Neighbourhood
    mechanism: DeclaredMechanism | None = None

    @field_validator("epsilon")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("a released claim has a finite epsilon (a model without a DP claim is never released)")
        return v


class LedgerAudit(_Frozen):
    """The audit that passed the release: the git commit holding its audit files, the sha256 of its gate and of
    the released model file (``data/defenders/<name>/model.*``; ``None`` in entries written before it was kept)."""

    commit: str = Field(pattern=_HEX40)
    gate_hash: str = Field(pattern=_HEX64)
    model_sha256: str | None = Field(None, pattern=_HEX64)


class Release(_Frozen):
    """One released model (an entry of ``releases.yaml``)."""

    name: str = Field(min_length=1)
    defender: str = Field(min_length=1)
    date: AwareDatetime
    dataset: LedgerDataset
    claim: LedgerClaim
    audit: LedgerAudit

    @field_serializer("date")
    def _iso(self, value: datetime) -> str:
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Ledger(_Frozen):
    """``releases.yaml``: the format ``version`` and the releases, oldest first (names unique)."""

    version: Literal[1] = LEDGER_VERSION
    releases: tuple[Release, ...] = ()

    @model_validator(mode="after")
    def _unique_names(self) -> "Ledger":
        seen: set[str] = set()
        for i, r in enumerate(self.releases):
            if r.name in seen:
                raise ValueError(f"releases[{i}].name {r.name!r} is used twice; release names are unique")
            seen.add(r.name)
        return self

    def for_identity(self, identity: str) -> tuple[Release, ...]:
        """The releases made from the data set ``identity`` (the same people), oldest first."""
        return tuple(r for r in self.releases if r.dataset.identity == identity)

    def named(self, name: str) -> Release | None:
        """The release called ``name``, if any."""
        return next((r for r in self.releases if r.name == name), None)


def _message(path: Path, err: ValidationError) -> str:
    """One line per problem: ``<file>: <key>: <what is wrong>``."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in e["loc"]).replace(".[", "[")
        lines.append(f"{loc or '<root>'}: {e['msg'].removeprefix('Value error, ')}")
    return f"{path}: " + "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")


def parse_ledger(raw: Any, path: Path = LEDGER_FILE) -> Ledger:
    """Type a decoded ledger (``LedgerError`` naming ``path`` and the key)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise LedgerError(f"{path} must be a mapping with keys version and releases, got {type(raw).__name__}")
    try:
        return Ledger.model_validate(raw)
    except ValidationError as err:
        raise LedgerError(_message(path, err) + " (fix the entry or restore the file from git)") from None


def read_ledger(path: str | Path = LEDGER_FILE) -> Ledger:
    """Read and validate ``releases.yaml``.

    Raises:
        FileNotFoundError: the file does not exist (the message says how to create it).
        LedgerError: not YAML, or not the ledger's shape (the message names the file and the key).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: create it with the two lines `version: 1` and `releases: []` "
                                "(the empty ledger) and commit it") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise LedgerError(f"{path} is not valid YAML ({err}); restore it from git") from None
    return parse_ledger(raw, path)


def dump_ledger(ledger: Ledger, header: str = LEDGER_HEADER) -> str:
    """The text of ``releases.yaml``: ``header`` (comment lines) then the ledger as block YAML."""
    body = yaml.safe_dump(ledger.model_dump(mode="json", exclude_none=False), sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=120)
    return header + body


def _header(text: str) -> str:
    """The leading comment lines of an existing ledger (kept on every append)."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines) or LEDGER_HEADER


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the ledger's folder, so that two appends never interleave (POSIX; elsewhere none)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: appends rely on the atomic replace alone
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def append_release(path: str | Path, release: Release) -> Ledger:
    """Append ``release`` to the ledger at ``path`` and return the new ledger.

    The read, the check and the write happen under one exclusive lock, and the file is replaced atomically:
    a crash leaves the old ledger or the new one, never half of it.

    Raises:
        FileNotFoundError, LedgerError: as :func:`read_ledger`; or a release of that name exists already.
    """
    path = Path(path)
    with _locked(path.resolve().parent):
        ledger = read_ledger(path)
        if ledger.named(release.name) is not None:
            raise LedgerError(f"{path} already holds a release named {release.name!r}: pass another --name")
        new = Ledger(version=ledger.version, releases=(*ledger.releases, release))
        with atomic_file(path) as fh:
            fh.write(dump_ledger(new, _header(path.read_text(encoding="utf-8"))))
    return new
