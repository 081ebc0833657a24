"""Compare the audited ε lower bounds of one defender with its DP claim — like with like.

One function decides whether a bound violates a claim, used by the stage that writes
``metrics/audit.json`` (its ``violation`` flags) and by the release gate, so the two never
disagree. Each bound carries the δ it was computed at and the neighbourhood it certifies;
the claim is converted to that neighbourhood first (:meth:`PrivacyClaim.implied_for`, group
privacy), and a bound for a neighbourhood the claim says nothing about is *not comparable*
(shown, never gated). A bound computed at another δ than the (converted) claim's is not
comparable either: ε lower bounds at a smaller δ are larger, so comparing them would accuse
honest recipes.

``metrics/audit.json`` entries are typed by :mod:`privaudit.verdict.metrics_files`; :func:`audited_bounds`
lists the ε lower bounds of one. A bound that records no neighbourhood/δ (older files, hand-made
tests) is read as a bound for the claim's own neighbourhood and δ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.claims.claim import PrivacyClaim
from privaudit.verdict.metrics_files import AuditEntry, RecordedClaim, parse_entry

__all__ = ["AuditedBound", "BoundFinding", "audited_bounds", "check_bounds", "claim_of"]

#: relative tolerance when matching a bound's δ with the claim's (JSON round trips)
_DELTA_RTOL = 1e-6


@dataclass(frozen=True)
class AuditedBound:
    """One ε lower bound of ``metrics/audit.json`` with what it certifies."""

    kind: str
    source: str
    epsilon: float
    delta: float | None
    neighbourhood: str | None
    level: float | None
    failed_checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class BoundFinding:
    """The comparison of one bound with the claim."""

    bound: AuditedBound
    compared_with: PrivacyClaim | None
    violation: bool
    reason: str | None  # why it violates, or why it is not comparable

    @property
    def comparable(self) -> bool:
        return self.compared_with is not None


def claim_of(info: Mapping[str, Any] | None, where: str) -> PrivacyClaim | None:
    """The claim recorded in a defender's ``info.json`` (``claimed_epsilon/delta/neighbourhood``), if any.

    Raises:
        ValueError: a ``claimed_*`` value has the wrong type (the message names ``<where>.<key>``).
    """
    return None if info is None else parse_entry(RecordedClaim, info, where).claim


def audited_bounds(entry: AuditEntry | None) -> list[AuditedBound]:
    """Every ε lower bound present in one ``metrics/audit.json`` entry (absent/null ones left out)."""
    if entry is None:
        return []
    return [AuditedBound(kind=kind, source=source, epsilon=eps, delta=block.delta, neighbourhood=block.neighbourhood,
                         level=block.level, failed_checks=block.failed_checks or ())
            for kind, source, block, eps in entry.epsilon_lower_bounds()]


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4g}"


def check_bounds(claim: PrivacyClaim, bounds: list[AuditedBound], max_excess: float = 0.0) -> list[BoundFinding]:
    """Compare each bound with the claim converted to the bound's neighbourhood.

    A violation is ``ε̂ > ε_claim' + max_excess`` (ε_claim' the claim implied for the bound's
    neighbourhood, at the bound's δ), a non-finite ε̂, or a failed assumption check of the bound
    (``failed_checks``: e.g. the white-box audit found batches that are not Poisson-sampled).
    """
    findings: list[BoundFinding] = []
    for b in bounds:
        implied = claim.implied_for(b.neighbourhood) if b.neighbourhood else claim
        if implied is None:
            findings.append(BoundFinding(b, None, False, (
                f"{b.source} certifies the {b.neighbourhood} neighbourhood, about which a "
                f"{claim.neighbourhood} claim says nothing: shown, not compared")))
            continue
        if b.delta is not None and not math.isclose(b.delta, implied.delta, rel_tol=_DELTA_RTOL, abs_tol=1e-300):
            findings.append(BoundFinding(b, None, False, (
                f"{b.source} was computed at δ = {b.delta:.3g}, not at the claim's δ = {implied.delta:.3g} "
                f"for {implied.neighbourhood}: shown, not compared")))
            continue
        limit = implied.epsilon + max_excess
        converted = "" if implied is claim else (
            f" (the claim ({_fmt(claim.epsilon)}, {claim.delta:.3g}) for {claim.neighbourhood} implies "
            f"({_fmt(implied.epsilon)}, {implied.delta:.3g}) for {implied.neighbourhood})")
        if b.failed_checks:
            findings.append(BoundFinding(b, implied, True, (
                f"{b.source.split('.')[0]} audit rejected its assumption(s): {'; '.join(b.failed_checks)}")))
        elif not math.isfinite(b.epsilon) or b.epsilon > limit:
            findings.append(BoundFinding(b, implied, True, (
                f"audited ε lower bound {b.source} = {_fmt(b.epsilon)} > claimed ε {_fmt(implied.epsilon)} + "
                f"gate.max_epsilon_excess {_fmt(max_excess)} = {_fmt(limit)}{converted}")))
        else:
            findings.append(BoundFinding(b, implied, False, None))
    return findings
