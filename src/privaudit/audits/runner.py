"""The per-defender loop of every audit, written once.

:func:`run_audit` runs one registered audit (:data:`privaudit.audit_registry.AUDITS`) over the
defenders it applies to: the budget is planned once from params
(:meth:`privaudit.config.Params.budget_plan`), a defender is audited iff its budget gives the
audit's bound a level (the registry line's ``applies`` fact), and the audit module's ``run`` gets
an :class:`~privaudit.audits.protocol.AuditRequest` with that level, the defender's claim, its
spec and ``base.seed``, plus the params block its line names. The stages call this function with
the audit's name from their command line; nothing here names an audit.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.audit_registry import audit_line
from privaudit.audits.entry import read_claim
from privaudit.audits.protocol import AuditBound, AuditInputs, AuditRequest
from privaudit.config import Params

__all__ = ["AuditRun", "run_audit"]


@dataclass(frozen=True)
class AuditRun:
    """One audit's results: ``bounds`` per defender it applied to, in params order."""

    audit: str
    bounds: dict[str, AuditBound]

    def blocks(self) -> dict[str, dict[str, Any]]:
        """``data/audit/<audit>.json``: the ``metrics/audit.json`` block of every audited defender."""
        return {name: b.block() for name, b in self.bounds.items()}

    def lines(self) -> list[str]:
        """The stage log: each defender's summary lines."""
        return [line for b in self.bounds.values() for line in b.lines]

    def tables(self) -> dict[str, Any]:
        """The per-defender tables some audits produce (LiDP: ε̂ vs trials), by defender."""
        return {name: b.table for name, b in self.bounds.items() if b.table is not None}


def _module(name: str) -> Any:
    line = audit_line(name)
    module = importlib.import_module(line.module)
    if not callable(getattr(module, "run", None)):
        raise ValueError(f"{line.module} is registered as audit {name!r} but has no run(request, inputs, settings)")
    return module


def run_audit(name: str, params: Params, inputs: AuditInputs, *, defenders_dir: Path, device: str = "cpu") -> AuditRun:
    """Run the registered audit ``name`` for every defender it applies to.

    Args:
        name: a registered audit (``ValueError`` naming the registered ones otherwise).
        params: the validated params (budget plan, defenders, ``base.seed``, ``lidp.delta`` as the δ
            where a claim gives none, the audit's own params block).
        inputs: what the stage loaded (the Defender set, the canary statistics).
        defenders_dir: ``data/defenders`` (each defender's claim, ``info.json``).
        device: the training device of trainer audits.
    """
    line = audit_line(name)
    module = _module(name)
    plan = params.budget_plan()
    settings = getattr(params, line.settings)
    kind = line.bounds[0].kind  # the bounds of one audit share its level
    bounds: dict[str, AuditBound] = {}
    for spec in params.defenders:
        if not plan.applies(spec.name, kind):
            continue
        request = AuditRequest(spec=spec, claim=read_claim(defenders_dir, spec.name), level=plan.level(spec.name, kind),
                               default_delta=params.lidp.delta, seed=params.base.seed, device=device)
        bounds[spec.name] = module.run(request, inputs, settings)
    return AuditRun(name, bounds)
