"""The per-defender loop of every audit, written once.

:func:`run_audit` runs one registered audit (:data:`privaudit.claims.registry.AUDITS`) over the
defenders it applies to: the budget is planned once from params
(:meth:`privaudit.config.Params.budget_plan`, in :meth:`AuditPlan.of`, which the stage calls), a defender
is audited iff its budget gives the audit's bound a level (the registry line's ``applies`` fact), and the
audit module's ``run`` gets an :class:`~privaudit.audits.protocol.AuditRequest` with that level, the
defender's claim, its spec and ``base.seed``, plus its own settings (read once off the params block its
line names). The stages call this
function with the audit's name from their command line; nothing here names an audit, and nothing in
:mod:`privaudit.audits` reads a params object: the plan is typed.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from privaudit.audits.protocol import AuditBound, AuditInputs, AuditRequest, settings_from
from privaudit.canaries.stats_files import UnusableScores
from privaudit.defenders.info_file import read_defender_info
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.seeding import SeededBlock
from privaudit.claims.error_budget import BudgetPlan
from privaudit.claims.registry import NOT_AUDITED_KEY, audit_line

__all__ = ["AuditPlan", "AuditRun", "audit_request", "run_audit"]


class _WithDelta(Protocol):
    @property
    def delta(self) -> float: ...


class ParamsWithAudits(Protocol):
    """What :meth:`AuditPlan.of` reads of the params (:class:`privaudit.config.Params` is one)."""

    @property
    def defenders(self) -> Sequence[DefenderSpecBase]: ...
    @property
    def base(self) -> SeededBlock: ...
    @property
    def lidp(self) -> _WithDelta: ...

    def budget_plan(self) -> BudgetPlan: ...


@dataclass(frozen=True)
class AuditPlan:
    """What one audit reads of the params, built once by its stage (:meth:`of`).

    Attributes:
        audit: the registered audit's name.
        budget: the error budget planned from params (every audit's level comes from it).
        defenders: every defender's spec, in params order.
        default_delta: ``lidp.delta``, the δ where a claim gives none.
        seed: ``base.seed``.
        settings: the audit's own settings (its module's ``SETTINGS`` type), read once off the params block its
            registry line names (``params.<settings>``).
    """

    audit: str
    budget: BudgetPlan
    defenders: tuple[DefenderSpecBase, ...]
    default_delta: float
    seed: int
    settings: Any

    @classmethod
    def of(cls, name: str, params: ParamsWithAudits) -> "AuditPlan":
        """The plan of the registered audit ``name`` (``ValueError`` naming the registered ones otherwise)."""
        line = audit_line(name)
        settings = settings_from(_module(name).SETTINGS, getattr(params, line.settings))
        return cls(audit=name, budget=params.budget_plan(), defenders=tuple(params.defenders),
                   default_delta=params.lidp.delta, seed=params.base.seed, settings=settings)


@dataclass(frozen=True)
class AuditRun:
    """One audit's results: ``bounds`` per defender it applied to, in params order; ``not_audited``: the
    defenders it applied to but could not audit (unusable scores), each with its one-line reason."""

    audit: str
    bounds: dict[str, AuditBound]
    not_audited: dict[str, str] = field(default_factory=dict)

    def blocks(self) -> dict[str, dict[str, Any]]:
        """``data/audit/<audit>.json``: the ``metrics/audit.json`` block of every audited defender, and
        ``{"not_audited": reason}`` for one it could not audit (:data:`NOT_AUDITED_KEY`)."""
        return {name: b.block() for name, b in self.bounds.items()} | {
            name: {NOT_AUDITED_KEY: reason} for name, reason in self.not_audited.items()}

    def lines(self) -> list[str]:
        """The stage log: each defender's summary lines."""
        return [line for b in self.bounds.values() for line in b.lines] + [
            f"{self.audit}: {name}: NOT AUDITED: {reason}" for name, reason in self.not_audited.items()]

    def tables(self) -> dict[str, Any]:
        """The per-defender tables some audits produce (LiDP: ε̂ vs trials), by defender."""
        return {name: b.table for name, b in self.bounds.items() if b.table is not None}


def _module(name: str) -> Any:
    line = audit_line(name)
    module = importlib.import_module(line.module)
    if not callable(getattr(module, "run", None)) or not isinstance(getattr(module, "SETTINGS", None), type):
        raise ValueError(f"{line.module} is registered as audit {name!r} but lacks run(request, inputs, settings) "
                         "or its SETTINGS type")
    return module


def run_audit(plan: AuditPlan, inputs: AuditInputs, *, defenders_dir: Path, device: str = "cpu") -> AuditRun:
    """Run the registered audit ``plan.audit`` for every defender it applies to.

    Args:
        plan: the audit's typed plan (:meth:`AuditPlan.of`: budget, defenders, ``base.seed``, ``lidp.delta``
            as the δ where a claim gives none, the audit's own settings).
        inputs: what the stage loaded (the Defender set, the canary statistics).
        defenders_dir: ``data/defenders`` (each defender's claim, ``info.json``).
        device: the training device of trainer audits.
    """
    module = _module(plan.audit)
    if not isinstance(plan.settings, module.SETTINGS):
        raise TypeError(f"AuditPlan.settings of {plan.audit!r} is a {type(plan.settings).__name__}, not "
                        f"{module.SETTINGS.__name__}; build the plan with AuditPlan.of")
    bounds: dict[str, AuditBound] = {}
    not_audited: dict[str, str] = {}
    for spec in plan.defenders:
        request = audit_request(plan, spec, defenders_dir, device)
        if request is None:
            continue
        try:
            bounds[spec.name] = module.run(request, inputs, plan.settings)
        except UnusableScores as exc:  # this defender's scores, not the audit: the others go on
            not_audited[spec.name] = str(exc)
    return AuditRun(plan.audit, bounds, not_audited)


def audit_request(plan: AuditPlan, spec: DefenderSpecBase, defenders_dir: Path, device: str = "cpu") -> AuditRequest | None:
    """The request of audit ``plan.audit`` for defender ``spec`` (its claim, its level), or ``None`` when the audit
    does not apply to it (also what the plan stage asks to price a smaller black-box audit)."""
    kind = audit_line(plan.audit).bounds[0].kind  # the bounds of one audit share its level
    if not plan.budget.applies(spec.name, kind):
        return None
    return AuditRequest(spec=spec, claim=read_defender_info(defenders_dir, spec.name).claim,
                        level=plan.budget.level(spec.name, kind), default_delta=plan.default_delta,
                        seed=plan.seed, device=device)
