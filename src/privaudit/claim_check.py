"""Compare the audited ε lower bounds of one defender with its DP claim — like with like.

One function decides whether a bound violates a claim, used by the stage that writes
``metrics/audit.json`` (its ``violation`` flags) and by the release gate, so the two never
disagree. Each bound carries the δ it was computed at and the neighbourhood it certifies;
the claim is converted to that neighbourhood first (:meth:`PrivacyClaim.implied_for`, group
privacy), and a bound for a neighbourhood the claim says nothing about is *not comparable*
(shown, never gated). A bound computed at another δ than the (converted) claim's is not
comparable either: ε lower bounds at a smaller δ are larger, so comparing them would accuse
honest recipes.

``metrics/audit.json`` entries are read by :func:`audited_bounds`; entries written before
bounds recorded their neighbourhood/δ (older files, hand-made tests) are read as bounds for the
claim's own neighbourhood and δ, and every bound present counts as gated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.claims import NEIGHBOURHOODS, PrivacyClaim

__all__ = ["AuditedBound", "BoundFinding", "audited_bounds", "check_bounds", "claim_of", "BOUND_SOURCES"]

#: (bound kind, block in the audit entry, key of the ε lower bound, display name)
BOUND_SOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("whitebox", "whitebox", "eps_lower_bound", "whitebox.eps_lower_bound"),
    ("one_run", "one_run", "eps_lower_bound", "one_run.eps_lower_bound"),
    ("lidp", "lidp", "eps_lower_bound", "lidp.eps_lower_bound"),
    ("lidp_k1", "lidp", "eps_lower_bound_k1", "lidp.eps_lower_bound_k1"),
    ("game3", "game3", "eps_low", "game3.eps_low"),
)

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


def _num(block: Mapping[str, Any], key: str, where: str) -> float | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}.{key} must be a number or null, got {value!r}")
    return float(value)


def claim_of(entry: Mapping[str, Any] | None, where: str) -> PrivacyClaim | None:
    """The claim recorded in an audit entry (``claimed_epsilon/delta/neighbourhood``), if any."""
    if entry is None:
        return None
    eps = _num(entry, "claimed_epsilon", where)
    if eps is None or not math.isfinite(eps):
        return None
    delta = _num(entry, "claimed_delta", where) or 0.0
    nb = entry.get("claimed_neighbourhood") or "add_remove"
    if nb not in NEIGHBOURHOODS:
        raise ValueError(f"{where}.claimed_neighbourhood must be one of {list(NEIGHBOURHOODS)}, got {nb!r}")
    return PrivacyClaim(eps, delta, nb)


def audited_bounds(entry: Mapping[str, Any] | None, where: str) -> list[AuditedBound]:
    """Every ε lower bound present in one ``metrics/audit.json`` entry (absent/null ones left out)."""
    out: list[AuditedBound] = []
    if entry is None:
        return out
    for kind, block_name, key, source in BOUND_SOURCES:
        block = entry.get(block_name)
        if block is None:
            continue
        if not isinstance(block, Mapping):
            raise ValueError(f"{where}.{block_name} must be an object, got {type(block).__name__}: {block!r}")
        eps = _num(block, key, f"{where}.{block_name}")
        if eps is None:
            continue
        nb = block.get("neighbourhood")
        checks = block.get("failed_checks") or []
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            raise ValueError(f"{where}.{block_name}.failed_checks must be a list of strings, got {checks!r}")
        level = _num(block, "level", f"{where}.{block_name}")
        out.append(AuditedBound(kind=kind, source=source, epsilon=eps, delta=_num(block, "delta", f"{where}.{block_name}"),
                                neighbourhood=str(nb) if nb is not None else None, level=level,
                                failed_checks=tuple(checks)))
    return out


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
