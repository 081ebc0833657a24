"""Assemble ``metrics/audit.json`` from the blocks the audits wrote (``data/audit/<audit>.json``).

One entry per defender holds the claim (``claimed_epsilon``, ``claimed_delta``,
``claimed_neighbourhood``), the error budget split (``budget``: ``beta``, ``gated``, ``diagnostic``,
``levels``), one block per registered audit (:func:`privaudit.claims.registry.block_audits`; each
with its ε lower bound, ``delta``, ``neighbourhood`` and ``level``; ``null`` when the audit did not
run for the defender), and ``violation``/``violations`` computed by
:func:`privaudit.verdict.claim_check.check_bounds` — the same function the release gate uses, over the
gated bounds only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privaudit.claims.registry import NOT_AUDITED_KEY, block_audits
from privaudit.verdict.claim_check import audited_bounds, check_bounds, claim_of
from privaudit.claims.error_budget import BudgetPlan, ErrorBudget
from privaudit.verdict.metrics_files import AuditEntry, parse_entry

__all__ = ["AuditMetricsBuild", "assemble_entry", "merge_audit_blocks"]


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
        blocks: ``{audit: block}`` for the registered audits whose block is part of ``metrics/audit.json``
            (:func:`privaudit.claims.registry.block_audits`); absent or ``None`` = not run; a block holding only
            ``not_audited`` = the audit applied but could not run (its reason goes to the entry's ``not_audited``,
            the block is ``None``).
    """
    claim = claim_of(info, f"data/defenders/{name}/info.json")
    entry: dict[str, Any] = {
        "claimed_epsilon": None if claim is None else claim.epsilon,
        "claimed_delta": None if claim is None else claim.delta,
        "claimed_neighbourhood": None if claim is None else claim.neighbourhood,
        "claimed_mechanism": None if claim is None or claim.mechanism is None else claim.mechanism.model_dump(mode="json"),
        "audited": audited,
        "budget": budget.as_dict(),
    }
    unknown = sorted(set(blocks) - {a.name for a in block_audits()})
    if unknown:
        raise ValueError(f"{name}: audit block(s) {unknown} are not registered in privaudit.claims.registry.AUDITS")
    not_audited: dict[str, str] = {}
    for audit in block_audits():
        block = blocks.get(audit.name)
        if block is not None and NOT_AUDITED_KEY in block:
            not_audited[audit.name] = str(block[NOT_AUDITED_KEY])
            block = None
        entry[audit.name] = None if block is None else dict(block)
    if not_audited:  # absent when every audit that applied ran (older entries read the same)
        entry[NOT_AUDITED_KEY] = not_audited
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


@dataclass(frozen=True)
class AuditMetricsBuild:
    """``metrics/audit.json`` (``entries``) and one summary line per defender."""

    entries: dict[str, dict[str, Any]]
    lines: list[str]


def _shown(block: Mapping[str, Any], audit: str) -> str:
    key = next(b.epsilon_key for a in block_audits() if a.name == audit for b in a.bounds)
    return f"{audit} {block[key]:.3f}" if block.get(key) is not None else f"{audit} none"


def merge_audit_blocks(
    names: Sequence[str], *, audited: set[str], plan: BudgetPlan, infos: Mapping[str, Mapping[str, Any]],
    blocks: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> AuditMetricsBuild:
    """Every defender's ``metrics/audit.json`` entry from the audits' result files.

    Args:
        names: all defenders, in params order; ``audited``: those with canary audits (``canaries.defenders``).
        plan: the error budget of every defender (:meth:`privaudit.config.Params.budget_plan`).
        infos: every defender's ``info.json`` record (read and validated by
            :func:`privaudit.defenders.info_file.read_defender_info`), whose ``claimed_*`` keys the entry records.
        blocks: ``{audit: {defender: block}}``, one mapping per registered audit of
            ``metrics/audit.json`` (a defender missing from one: that audit did not run for it).
    """
    missing = [a.name for a in block_audits() if a.name not in blocks]
    if missing:
        raise ValueError(f"no results for the registered audit(s) {missing}: pass data/audit/<audit>.json for each")
    entries: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    for name in names:
        info = infos[name]
        found = {audit: per[name] for audit, per in blocks.items() if name in per}
        entries[name] = assemble_entry(info, plan.budget(name), name=name, audited=name in audited, blocks=found)
        shown = ", ".join(_shown(b, a) for a, b in found.items() if b and NOT_AUDITED_KEY not in b)
        lines.append(f"audit: {name}: eps lower bounds {shown or 'none'}; claimed eps {info.get('claimed_epsilon')}; "
                     f"violation {entries[name]['violation']}")
    return AuditMetricsBuild(entries, lines)
