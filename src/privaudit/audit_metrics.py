"""Assemble one defender's entry of ``metrics/audit.json`` from the audits that ran.

The entry holds the claim (``claimed_epsilon``, ``claimed_delta``, ``claimed_neighbourhood``), the
error budget split (``budget``: ``beta``, ``gated``, ``diagnostic``, ``levels``), one block per
audit (``game3``, ``lidp``, ``whitebox``, ``one_run``; each with its ε lower bound, ``delta``,
``neighbourhood`` and ``level``), and ``violation``/``violations`` computed by
:func:`privaudit.claim_check.check_bounds` — the same function the release gate uses, over the
gated bounds only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privaudit.claim_check import audited_bounds, check_bounds, claim_of
from privaudit.artifacts import read_json
from privaudit.claims import PrivacyClaim
from privaudit.error_budget import ErrorBudget
from privaudit.metrics_files import AuditEntry, parse_entry

__all__ = ["assemble_entry", "audit_delta", "read_claim"]


def read_claim(defenders_dir: Path, name: str) -> PrivacyClaim | None:
    """The claim of defender ``name`` from ``<defenders_dir>/<name>/info.json`` (``None``: no ε claimed).

    ``info.json`` carries the same ``claimed_*`` keys as a ``metrics/audit.json`` entry, so it is read
    by :func:`privaudit.claim_check.claim_of`.
    """
    path = defenders_dir / name / "info.json"
    return claim_of(read_json(path), str(path))


def audit_delta(claim: PrivacyClaim | None, neighbourhood: str, default: float) -> float:
    """The δ an audit of ``neighbourhood`` must use to be compared with ``claim``.

    The claim's δ, converted to the audit's neighbourhood (group privacy); ``default``
    (``lidp.delta``) when there is no claim or the claim says nothing about that neighbourhood.
    """
    if claim is None:
        return default
    implied = claim.implied_for(neighbourhood)
    return default if implied is None else implied.delta


def assemble_entry(
    info: Mapping[str, Any],
    budget: ErrorBudget,
    *,
    name: str,
    audited: bool,
    blocks: Mapping[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """One ``metrics/audit.json`` entry.

    Args:
        info: the defender's ``info.json`` (claim).
        budget: its error budget (:meth:`privaudit.config.Params.error_budget`).
        name: defender name (for messages).
        audited: whether the canary audits (Game 3, LiDP) ran for it.
        blocks: ``{"game3": ..., "lidp": ..., "whitebox": ..., "one_run": ...}``; ``None`` = not run.
    """
    claim = claim_of(info, f"data/defenders/{name}/info.json")
    entry: dict[str, Any] = {
        "claimed_epsilon": None if claim is None else claim.epsilon,
        "claimed_delta": None if claim is None else claim.delta,
        "claimed_neighbourhood": None if claim is None else claim.neighbourhood,
        "audited": audited,
        "budget": budget.as_dict(),
    }
    for key in ("game3", "lidp", "whitebox", "one_run"):
        block = blocks.get(key)
        entry[key] = None if block is None else dict(block)
    violations: list[str] = []
    if claim is not None:
        bounds = audited_bounds(parse_entry(AuditEntry, entry, f"audit.{name}"))
        for finding in check_bounds(claim, bounds):
            block = entry[finding.bound.source.split(".")[0]]
            if finding.compared_with is not None:
                block.setdefault("compared_epsilon", {})[finding.bound.kind] = finding.compared_with.epsilon
            if finding.violation and budget.is_gated(finding.bound.kind):
                violations.append(finding.bound.kind)
            block.setdefault("violation", False)
            block["violation"] = bool(block["violation"] or finding.violation)
    entry["violations"] = violations
    entry["violation"] = bool(violations)
    return entry
