"""The release gate's total privacy budget over the ledger of releases (``gate.total_budget``).

Every model released from one data set spends privacy of the same people: what a person has lost is the
composition of every release that used their record (Dwork & Roth 2014, §3.5; the optimal composition of
Kairouz, Oh & Viswanath 2015 for (ε, δ) points, PLD composition for declared mechanisms:
:mod:`privaudit.claims.composition`). With ``gate.total_budget: {epsilon, delta}`` the gate composes every
earlier release of the same data set identity (``releases.yaml``, :mod:`privaudit.claims.ledger`) with each
candidate's claim and fails a candidate whose composed ε at the budget's δ exceeds the budget's ε, naming the
composed ε, the budget and the releases composed. A candidate without a DP claim has ε = ∞ and fails.

Claims are composed in the candidate's neighbourhood: an earlier release made for another neighbourhood is
converted by group privacy (:meth:`privaudit.claims.claim.PrivacyClaim.implied_for`, which keeps the (ε, δ)
point and drops the curve); a release that implies nothing for it (a label-DP release against an add/remove
candidate) cannot be composed and fails the candidate, naming both.

:func:`ledger_block` returns the ``ledger`` block of ``metrics/gate.json`` (:class:`LedgerBlock`) and the
reasons per defender; :func:`privaudit.verdict.gate.evaluate_gate` takes a :class:`LedgerContext` and is
unchanged without one (``gate.total_budget: null``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from privaudit.claims.composition import compose
from privaudit.claims.ledger import Release
from privaudit.claims.claim import PrivacyClaim
from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.verdict.metrics_files import DefenderLedger, LedgerBlock

__all__ = ["BudgetSettings", "LedgerContext", "ledger_block", "release_claim"]

#: relative slack of the comparison with the budget (float round-off of the composition, never a real excess)
_SLACK = 1e-9


class BudgetSettings(Protocol):
    """What the gate reads of ``gate.total_budget`` (:class:`privaudit.config.TotalBudget` is one)."""

    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...


@dataclass(frozen=True)
class LedgerContext:
    """What the gate composes: the budget, the audited data set's identity and the ledger's releases of it."""

    budget: BudgetSettings
    identity: str
    releases: tuple[Release, ...]


def release_claim(release: Release) -> PrivacyClaim:
    """The :class:`PrivacyClaim` a ledger entry released (its point, neighbourhood and declared mechanism)."""
    c = release.claim
    return PrivacyClaim(c.epsilon, c.delta, c.neighbourhood, c.mechanism)


def _fmt(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.4g}"


def _in(neighbourhood: Neighbourhood, releases: Sequence[Release]) -> tuple[list[PrivacyClaim], list[str]]:
    """The releases' claims converted to ``neighbourhood`` and the names of those that imply nothing there."""
    claims, lost = [], []
    for r in releases:
        implied = release_claim(r).implied_for(neighbourhood)
        if implied is None:
            lost.append(f"{r.name} ({r.claim.neighbourhood.value})")
        else:
            claims.append(implied)
    return claims, lost


def _spent(ctx: LedgerContext) -> float | None:
    """Composed ε at the budget's δ of the releases so far, in the first neighbourhood every release implies
    (add_remove, replace_one, replace_label); 0 without releases, ``None`` when they share none."""
    if not ctx.releases:
        return 0.0
    for neighbourhood in Neighbourhood:
        claims, lost = _in(neighbourhood, ctx.releases)
        if not lost:
            return compose(claims).epsilon_at(ctx.budget.delta)
    return None


def _defender(name: str, claim: PrivacyClaim | None, ctx: LedgerContext) -> tuple[DefenderLedger, list[str]]:
    """One candidate's composed ε and its reasons (empty: within the budget)."""
    budget = (f"gate.total_budget ε = {_fmt(ctx.budget.epsilon)} at δ = {ctx.budget.delta:.3g} "
              f"(data set {ctx.identity!r})")
    names = [r.name for r in ctx.releases]
    composed_with = (f"{len(names)} earlier release(s) {names}" if names else "no earlier release")
    if claim is None:
        return DefenderLedger(composed_epsilon=None, within_budget=False), [
            f"{name}: no DP claim, so its composed ε with {composed_with} is unbounded (inf) under {budget}; "
            "a kind: python trainer declares one with claimed_epsilon and claimed_delta; a recipe without a DP "
            "mechanism (torch_mlp, logistic_regression, sklearn) has none: leave it out of the audit you release "
            "from, or set gate.total_budget: null for an audit that releases nothing"]
    claims, lost = _in(claim.neighbourhood, ctx.releases)
    if lost:
        return DefenderLedger(composed_epsilon=None, within_budget=False), [
            f"{name}: release(s) {lost} imply no guarantee for the candidate's neighbourhood "
            f"{claim.neighbourhood.value}, so they cannot be composed with it under {budget}; claim the candidate "
            "for a neighbourhood those releases cover, or give the data a new dataset.identity only if it holds "
            "other people"]
    composed = compose([*claims, claim]).epsilon_at(ctx.budget.delta)
    within = composed <= ctx.budget.epsilon * (1.0 + _SLACK)
    entry = DefenderLedger(composed_epsilon=None if math.isinf(composed) else composed, within_budget=within)
    if within:
        return entry, []
    unbounded = (" (no finite ε holds at that δ: the composition's own δ exceeds it; a budget δ above the claims' "
                 "δ together leaves room)" if math.isinf(composed) else "")
    return entry, [
        f"{name}: composed ε = {_fmt(composed)} at δ = {ctx.budget.delta:.3g} of its claim "
        f"(ε = {_fmt(claim.epsilon)}, δ = {claim.delta:.3g}) with {composed_with} exceeds {budget}{unbounded}"]


def ledger_block(claims: Mapping[str, PrivacyClaim | None], ctx: LedgerContext
                 ) -> tuple[LedgerBlock, dict[str, list[str]]]:
    """The ``ledger`` block of ``metrics/gate.json`` and each defender's budget reasons.

    Args:
        claims: every defender the gate judges, with its claim (``None``: no DP claim).
        ctx: the budget, the data set identity and the ledger's releases of it (oldest first).
    """
    spent = _spent(ctx)
    defenders: dict[str, DefenderLedger] = {}
    reasons: dict[str, list[str]] = {}
    for name, claim in claims.items():
        defenders[name], reasons[name] = _defender(name, claim, ctx)
    finite = spent is not None and math.isfinite(spent)
    block = LedgerBlock(
        identity=ctx.identity, budget_epsilon=ctx.budget.epsilon, budget_delta=ctx.budget.delta,
        releases=tuple(r.name for r in ctx.releases),
        spent_epsilon=spent if finite else None,
        left_epsilon=ctx.budget.epsilon - spent if finite and spent is not None else None,
        defenders=defenders)
    return block, reasons
