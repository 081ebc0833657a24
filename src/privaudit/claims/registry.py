"""The registry of audits: one line per audit, the only place that lists them.

It lives beside, not inside, :mod:`privaudit.audits`: ``privaudit.config`` (the error budget of
``gate.bounds``) and ``privaudit.verdict.metrics_files`` (the ``metrics/audit.json`` contract) read it, and
the audits import both, so the arrows point audits → config/metrics_files → audit_registry. It
imports nothing from privaudit.

Every audit of the family (:mod:`privaudit.audits`) is one module plus one :class:`AuditLine` in
:data:`AUDITS`. A line says, from params alone and without importing the audit's module (so
``privaudit.config`` can plan the error budget without torch or pandas):

- ``name``: the audit's block in ``metrics/audit.json``, its result file ``data/audit/<name>.json``
  and its stage;
- ``module``: the module that runs it (its ``run(request, inputs)`` follows
  :class:`privaudit.audits.protocol.Audit`);
- ``bounds``: the bounds it produces, each a kind of ``gate.bounds`` with the key of its ε lower
  bound inside the block (``None``: the bound is not an ε, e.g. the theory check of an accuracy);
- ``applies``: the fact about a defender that makes the audit applicable (:data:`APPLICABILITY`);
- ``inputs``: what it reads (:data:`INPUT_KINDS`): a trainer and the Defender set, the canary
  statistics of the canaries stage, or the LTU result;
- ``settings``: the params block the audit reads (``params.<settings>``, handed to ``run``);
- ``in_audit_json``: whether its block is part of ``metrics/audit.json`` (the theory check writes
  ``metrics/bounds.json`` instead).

The error budget (:mod:`privaudit.claims.error_budget`), the ``metrics/audit.json`` reader
(:mod:`privaudit.verdict.metrics_files`), the merge of the blocks (:mod:`privaudit.verdict.entry`) and the
release gate loop over these lines; none of them names an audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["APPLICABILITY", "AUDITS", "NOT_AUDITED_KEY", "BOUND_KINDS", "BOUND_LABELS", "DEFAULT_GATED", "EPSILON_BOUNDS", "INPUT_KINDS", "AuditLine",
           "BoundLine", "audit_line", "block_audits", "bound_line"]

#: the one key of an audit's block for a defender it applied to but could not audit (its scores were unusable):
#: ``{"not_audited": "<one line naming the defender, the experiment and what was found>"}``
NOT_AUDITED_KEY = "not_audited"

Applicability = Literal["always", "observable", "canary_audited", "theory_gated"]
#: what makes an audit applicable to a defender: every defender; an observable trainer (``kind: dp_sgd``
#: or ``kind: python`` with ``observable: true``); a defender in ``canaries.defenders``;
#: ``gate.fail_on_theory_violation``
APPLICABILITY: tuple[str, ...] = ("always", "observable", "canary_audited", "theory_gated")
InputKind = Literal["trainer", "canaries", "ltu"]
INPUT_KINDS: tuple[str, ...] = ("trainer", "canaries", "ltu")


@dataclass(frozen=True)
class BoundLine:
    """One bound an audit produces: its ``gate.bounds`` kind, the key of its ε in the block, a label, and
    whether the default ``gate.bounds`` gates it (``False``: a diagnostic view unless the user gates it)."""

    kind: str
    epsilon_key: str | None
    label: str
    gated_by_default: bool = True


@dataclass(frozen=True)
class AuditLine:
    """One registered audit (see the module docstring)."""

    name: str
    module: str
    bounds: tuple[BoundLine, ...]
    applies: Applicability
    inputs: InputKind
    settings: str
    in_audit_json: bool = True


#: the registered audits, in the order the report and ``gate.bounds`` list their bounds
AUDITS: tuple[AuditLine, ...] = (
    AuditLine("whitebox", "privaudit.audits.whitebox",
              (BoundLine("whitebox", "eps_lower_bound", "white-box DP-SGD audit"),), "observable", "trainer", "whitebox"),
    AuditLine("one_run", "privaudit.audits.one_run",
              (BoundLine("one_run", "eps_lower_bound", "one-run black-box audit"),), "always", "trainer", "one_run"),
    AuditLine("blackbox", "privaudit.audits.blackbox",
              (BoundLine("blackbox", "eps_lower_bound", "many-run black-box audit (the claim's own curve)"),
               BoundLine("blackbox_rate", "eps_lower_bound_rate", "many-run black-box audit (assumption-free)",
                         gated_by_default=False)), "canary_audited", "canaries", "blackbox"),
    AuditLine("lidp", "privaudit.audits.lidp",
              (BoundLine("lidp", "eps_lower_bound", "LiDP (K canaries)"),
               BoundLine("lidp_k1", "eps_lower_bound_k1", "LiDP K=1 view", gated_by_default=False)), "canary_audited", "canaries", "lidp"),
    AuditLine("game3", "privaudit.audits.game3",
              (BoundLine("game3", "eps_low", "Game 3"),), "canary_audited", "canaries", "game3"),
    AuditLine("theory", "privaudit.verdict.theory",
              (BoundLine("theory", None, "theory check (attack accuracy vs. the claim's MI bound)"),),
              "theory_gated", "ltu", "bounds", in_audit_json=False),
)

#: every bound that can be compared with a claim, in the order the report lists them
BOUND_KINDS: tuple[str, ...] = tuple(b.kind for a in AUDITS for b in a.bounds)
#: the ε lower bounds among them (the others compare something else, e.g. an attack accuracy)
EPSILON_BOUNDS: tuple[str, ...] = tuple(b.kind for a in AUDITS for b in a.bounds if b.epsilon_key is not None)
BOUND_LABELS: dict[str, str] = {b.kind: b.label for a in AUDITS for b in a.bounds}
#: default ``gate.bounds``: every bound except the diagnostic views (the K = 1 LiDP view of the same trials)
DEFAULT_GATED: tuple[str, ...] = tuple(b.kind for a in AUDITS for b in a.bounds if b.gated_by_default)


def _check_registry(audits: tuple[AuditLine, ...]) -> None:
    names = [a.name for a in audits]
    kinds = [b.kind for a in audits for b in a.bounds]
    if len(set(names)) != len(names) or len(set(kinds)) != len(kinds):
        raise ValueError(f"privaudit.claims.registry: an audit name or bound kind is registered twice: {names}, {kinds}")
    for a in audits:
        # an audit lives in privaudit.audits; a check of the verdict that is no audit (the theory check, whose
        # block is metrics/bounds.json) in privaudit.verdict
        home = "privaudit.audits" if a.in_audit_json else "privaudit.verdict"
        if a.applies not in APPLICABILITY or a.inputs not in INPUT_KINDS or a.module != f"{home}.{a.name}":
            raise ValueError(f"privaudit.claims.registry: bad line {a}: applies in {APPLICABILITY}, inputs in "
                             f"{INPUT_KINDS}, module privaudit.audits.<name> (privaudit.verdict.<name> for a check "
                             "outside metrics/audit.json)")


_check_registry(AUDITS)


def audit_line(name: str) -> AuditLine:
    """The registered audit ``name`` (``ValueError`` naming the registered ones otherwise)."""
    for a in AUDITS:
        if a.name == name:
            return a
    raise ValueError(f"no audit {name!r} is registered; registered: {[a.name for a in AUDITS]}")


def bound_line(kind: str) -> tuple[AuditLine, BoundLine]:
    """The audit that produces bound ``kind`` and the bound's line."""
    for a in AUDITS:
        for b in a.bounds:
            if b.kind == kind:
                return a, b
    raise ValueError(f"no bound {kind!r} is registered; registered: {list(BOUND_KINDS)}")


def block_audits() -> tuple[AuditLine, ...]:
    """The audits whose block is part of ``metrics/audit.json``, in registry order."""
    return tuple(a for a in AUDITS if a.in_audit_json)
