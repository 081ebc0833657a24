"""One declared error budget for the release gate.

``gate.beta`` is the probability that the gate reports a violation of a DP claim that holds.
Several bounds are compared with the claim (white-box DP-SGD audit, one-run black-box audit,
LiDP, Game 3, the theory check of the attack accuracy); if each ran at β on its own, an honest
recipe would be accused with probability up to k·β. The budget is therefore split *before the
data is seen*, from params alone (which bounds apply to a defender depends only on its kind and
the ``canaries``/``gate`` settings): every gated bound that applies to a defender gets the level
β / k (Bonferroni; the union bound makes the total false-violation probability ≤ β whatever the
dependence between the bounds). Bounds that apply but are not in ``gate.bounds`` are computed at
the same per-bound level and shown as "diagnostic, not gated".

The budget is planned once for every defender (:class:`BudgetPlan`, ``Params.budget_plan()``) and
each audit gets its level from the plan (:func:`privaudit.audits.runner.run_audit`), so the number
recorded next to each bound in ``metrics/audit.json`` (``level``) is the one the gate relies on.
Which bounds exist and when they apply comes from :data:`privaudit.claims.registry.AUDITS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from privaudit.claims.registry import AUDITS, BOUND_KINDS, BOUND_LABELS, DEFAULT_GATED, EPSILON_BOUNDS

__all__ = ["BOUND_KINDS", "BOUND_LABELS", "DEFAULT_GATED", "EPSILON_BOUNDS", "BudgetPlan", "ErrorBudget",
           "applicable_bounds", "check_bound_kinds", "plan_budget"]


def check_bound_kinds(kinds: Sequence[str], where: str = "gate.bounds") -> tuple[str, ...]:
    """Return ``kinds`` as a tuple if each names a bound, else raise ``ValueError`` naming ``where``."""
    bad = [k for k in kinds if k not in BOUND_KINDS]
    if bad:
        raise ValueError(f"{where} has unknown bound(s) {bad}; allowed: {list(BOUND_KINDS)}")
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"{where} lists a bound twice: {list(kinds)}")
    return tuple(kinds)


def applicable_bounds(*, observable: bool, canary_audited: bool, theory: bool) -> tuple[str, ...]:
    """The bounds that can be computed for one defender, known from params before any data.

    Every registered audit (:data:`privaudit.claims.registry.AUDITS`) whose ``applies`` fact holds
    contributes all its bounds, in registry order.

    Args:
        observable: the defender's training can be watched (``kind: dp_sgd``, or a
            ``kind: python`` trainer declaring ``observable: true``): white-box audit.
        canary_audited: the defender is in ``canaries.defenders``: LiDP (both views) and Game 3.
        theory: ``gate.fail_on_theory_violation`` is on.
    """
    facts: Mapping[str, bool] = {"always": True, "observable": observable, "canary_audited": canary_audited,
                                 "theory_gated": theory}
    return tuple(b.kind for a in AUDITS if facts[a.applies] for b in a.bounds)


@dataclass(frozen=True)
class ErrorBudget:
    """The split of ``gate.beta`` over one defender's bounds.

    ``levels[kind]`` is the failure probability the bound ``kind`` is computed at: β / k for each
    of the k gated bounds that apply, the same for diagnostic bounds (never gated).
    """

    beta: float
    gated: tuple[str, ...]
    diagnostic: tuple[str, ...]
    levels: dict[str, float] = field(default_factory=dict)

    def level(self, kind: str) -> float:
        """Failure probability of bound ``kind``; ``ValueError`` if it does not apply."""
        if kind not in self.levels:
            raise ValueError(f"bound {kind!r} does not apply to this defender (applicable: {sorted(self.levels)})")
        return self.levels[kind]

    def is_gated(self, kind: str) -> bool:
        return kind in self.gated

    def sentence(self) -> str:
        """The budget and its split in one sentence (shown in the report)."""
        if not self.gated:
            return f"No bound is gated (gate.bounds is empty); gate.beta = {self.beta:g} is unused."
        share = self.beta / len(self.gated)
        gated = ", ".join(BOUND_LABELS[k] for k in self.gated)
        diag = (f"; {', '.join(BOUND_LABELS[k] for k in self.diagnostic)} shown as diagnostic, not gated"
                if self.diagnostic else "")
        return (f"A claim that holds is flagged with probability at most gate.beta = {self.beta:g}: "
                f"{len(self.gated)} gated bound(s) ({gated}) at {share:.3g} each (Bonferroni){diag}.")

    def as_dict(self) -> dict[str, object]:
        return {"beta": self.beta, "gated": list(self.gated), "diagnostic": list(self.diagnostic),
                "levels": dict(self.levels)}


def plan_budget(beta: float, gated: Sequence[str], applicable: Sequence[str]) -> ErrorBudget:
    """Split ``beta`` equally over the bounds in both ``gated`` and ``applicable``.

    >>> b = plan_budget(0.05, DEFAULT_GATED, applicable_bounds(observable=True, canary_audited=True, theory=True))
    >>> b.gated, b.diagnostic, round(b.level("lidp"), 4), round(b.level("lidp_k1"), 4)
    (('whitebox', 'one_run', 'blackbox', 'lidp', 'game3', 'theory'), ('blackbox_rate', 'lidp_k1'), 0.0083, 0.0083)
    >>> round(sum(b.levels[k] for k in b.gated), 12)
    0.05
    """
    if not 0.0 < beta < 1.0:
        raise ValueError(f"gate.beta must be in (0, 1), got {beta!r}")
    check_bound_kinds(gated)
    check_bound_kinds(applicable, "applicable bounds")
    on = tuple(k for k in BOUND_KINDS if k in gated and k in applicable)
    diag = tuple(k for k in BOUND_KINDS if k in applicable and k not in gated)
    share = beta / max(1, len(on))
    return ErrorBudget(beta=beta, gated=on, diagnostic=diag, levels={k: share for k in on + diag})


@dataclass(frozen=True)
class BudgetPlan:
    """The error budget of every defender, planned once from params before any data is seen
    (:meth:`privaudit.config.Params.budget_plan`); each audit gets its ``level`` from here."""

    beta: float
    budgets: Mapping[str, ErrorBudget]

    def budget(self, name: str) -> ErrorBudget:
        """Defender ``name``'s budget (``ValueError`` naming the planned defenders otherwise)."""
        if name not in self.budgets:
            raise ValueError(f"defender {name!r} is not in the budget plan (defenders: {sorted(self.budgets)})")
        return self.budgets[name]

    def level(self, name: str, kind: str) -> float:
        """The level bound ``kind`` of defender ``name`` is computed at."""
        return self.budget(name).level(kind)

    def applies(self, name: str, kind: str) -> bool:
        """Whether bound ``kind`` applies to defender ``name`` (it has a level)."""
        return kind in self.budget(name).levels
