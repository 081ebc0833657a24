"""Release gate: turn the audit metrics into a pass/fail verdict.

``evaluate_gate`` reads the three metrics files of the pipeline (``metrics/ltu.json``,
``metrics/audit.json``, ``metrics/bounds.json``, shapes fixed in docs/architecture.md, "Metrics
contracts") and returns the ``metrics/gate.json`` object
``{passed, reasons, defenders: {name: {passed, reasons}}}``.

Checks, per defender (every defender named in any of the three files):

1. **Privacy** (LTU, Eq. 1 of Pedersen et al. 2022): every attacker's privacy score must be
   at least ``gate.min_privacy``; the weakest score is the one of the strongest attacker.
2. **Utility** (Eq. 2): the utility score must be at least ``gate.min_utility``.
3. **Claimed ε**: when the defender claims (ε, δ)-DP, no *gated* audited ε lower bound
   (``budget.gated`` of its ``metrics/audit.json`` entry, from ``gate.bounds``: white-box
   ``whitebox.eps_lower_bound``, black-box ``one_run.eps_lower_bound``, LiDP
   ``lidp.eps_lower_bound`` / ``eps_lower_bound_k1``, Game 3 ``game3.eps_low``) may exceed the claim
   converted to the bound's neighbourhood at the bound's δ (:mod:`privaudit.claim_check`) plus
   ``gate.max_epsilon_excess``, and no white-box assumption check may have failed. Each bound is
   computed at its share of ``gate.beta`` (:mod:`privaudit.error_budget`), so a claim that holds
   is flagged with probability at most ``gate.beta``. A gated bound that applies but is missing,
   or a claim no gated bound is comparable with, fails with a reason marked ``[NOT AUDITED]``:
   the gate is never quieter than its audit. (Entries written before the budget existed gate
   every bound present, compared as for the claim's own neighbourhood and δ.)
4. **Theory** (``gate.fail_on_theory_violation`` and ``theory`` in ``gate.bounds``): the
   empirical attack accuracy (the maximum over A attackers) must not exceed any theoretical
   membership-inference accuracy upper bound implied by the claim for the LTU swap game
   (Thudi, Yeom, Erlingsson, Sablayrolles, and Izzo's 1/2 + η) by more than z standard errors,
   z = max(2, Φ⁻¹(1 − level/A)) with ``level`` the theory check's budget share
   (:func:`privaudit.report.checks.theory_z`). Exceeding a bound that holds for every attacker
   means the implementation or the privacy accounting is wrong.

Error bars (``gate.use_error_bars``). A release gate must not be easier to pass with a
*smaller* audit. Comparing ``privacy + stderr`` with the threshold would do exactly that:
fewer LTU rounds give a larger standard error and so a higher optimistic score. The gate
therefore uses the *pessimistic* one-standard-error bound for the requirements the recipe
has to demonstrate (``privacy - stderr >= min_privacy``, ``utility - stderr >= min_utility``),
and requires the evidence of a bug to be beyond z error bars before calling a theory
violation (``accuracy - z stderr > bound``). The audited ε values are already one-sided
lower confidence bounds, so they are compared as they are. With ``use_error_bars: false``
all comparisons use point estimates.

Missing data never raises ``KeyError``: a defender without an LTU result, without a utility,
without an ε audit while claiming DP, or without theoretical bounds while claiming DP (when
theory violations are gated) fails with a reason saying what is missing. A value of the
wrong type (a string where a number belongs, a list where an object belongs) is a corrupt
metrics file and raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from privaudit.claim_check import audited_bounds, check_bounds, claim_of
from privaudit.claims import PrivacyClaim
from privaudit.config import GateParams
from privaudit.error_budget import EPSILON_BOUNDS
from privaudit.report.checks import (
    BOUND_KINDS,
    accuracy_bounds,
    as_mapping,
    audited_epsilons,
    defender_names,
    empirical_stderr,
    fmt_value,
    privacy_stderr,
    read_number,
    theory_violations,
    theory_z,
    validate_gate_result,
)

#: marks a reason saying that a DP claim could not be audited (the report shows it in red)
NOT_AUDITED = "[NOT AUDITED]"

__all__ = [
    "NOT_AUDITED",
    "BOUND_KINDS",
    "GateParams",
    "accuracy_bounds",
    "audited_epsilons",
    "evaluate_gate",
    "theory_violations",
    "validate_gate_result",
]


def _attacker_entries(
    defender: str, entry: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The LTU results to check for one defender: the top level and every attacker.

    The top level is the strongest attacker per docs/architecture.md ("Metrics contracts");
    checking every attacker as well makes the gate hold even if the producer's notion of
    "strongest" differs from ours. Duplicates of the top-level attacker are dropped.
    """
    where = f"ltu.{defender}"
    results: list[tuple[str, Mapping[str, Any]]] = []
    top_name = entry.get("attacker")
    attackers = as_mapping(entry.get("attackers"), f"{where}.attackers") or {}
    if "privacy" in entry or not attackers:
        results.append((str(top_name) if top_name is not None else "strongest", entry))
    for name, sub in attackers.items():
        sub_map = as_mapping(sub, f"{where}.attackers.{name}")
        if sub_map is None:
            continue
        if top_name is not None and str(name) == str(top_name) and results:
            continue
        results.append((str(name), sub_map))
    return results


def _check_score(
    defender: str,
    label: str,
    value: float | None,
    stderr: float | None,
    threshold: float,
    param: str,
    use_error_bars: bool,
) -> str | None:
    """Compare one score (privacy or utility) with its threshold; return a reason or None."""
    if value is None:
        return f"{defender}: {label} is missing; required >= {param} = {fmt_value(threshold)}"
    if not math.isfinite(value):
        return f"{defender}: {label} = {value} is not finite; required >= {param} = {fmt_value(threshold)}"
    if use_error_bars:
        if stderr is None or not math.isfinite(stderr) or stderr < 0:
            return (
                f"{defender}: {label} = {fmt_value(value)} has no valid standard error ({stderr!r}), "
                f"so {label} - stderr >= {param} = {fmt_value(threshold)} cannot be shown "
                "(gate.use_error_bars is true)"
            )
        bound = value - stderr
        if bound < threshold:
            return (
                f"{defender}: {label} - stderr = {fmt_value(value)} - {fmt_value(stderr)} = {fmt_value(bound)} "
                f"< {param} = {fmt_value(threshold)}"
            )
        return None
    if value < threshold:
        return f"{defender}: {label} = {fmt_value(value)} < {param} = {fmt_value(threshold)}"
    return None


def _budget_levels(audit_entry: Mapping[str, Any] | None) -> dict[str, float]:
    """``budget.levels`` of an audit entry ({} for entries written before the budget existed)."""
    budget = as_mapping(audit_entry.get("budget"), "audit.budget") if audit_entry else None
    levels = as_mapping(budget.get("levels"), "audit.budget.levels") if budget else None
    return {str(k): float(v) for k, v in (levels or {}).items()}


def _gated_kinds(audit_entry: Mapping[str, Any], present: list[str]) -> list[str]:
    """The bound kinds the gate compares: ``budget.gated``, or every bound present (older files)."""
    budget = as_mapping(audit_entry.get("budget"), "audit.budget")
    if budget is None:
        return present
    gated = budget.get("gated")
    if not isinstance(gated, list) or not all(isinstance(k, str) for k in gated):
        raise ValueError(f"audit.budget.gated must be a list of bound names, got {gated!r}")
    return [k for k in gated if k in EPSILON_BOUNDS]


def _theory_not_comparable(bounds_entry: Mapping[str, Any] | None) -> bool:
    """bounds.json marks a claim whose neighbourhood says nothing about the LTU (swap) game."""
    return bool(bounds_entry is not None and bounds_entry.get("comparable") is False)


def _attacker_count(ltu_entry: Mapping[str, Any] | None) -> int:
    attackers = as_mapping(ltu_entry.get("attackers"), "ltu.attackers") if ltu_entry else None
    return max(1, len(attackers or {}))


def _claim_reasons(defender: str, claim: PrivacyClaim, entry: Mapping[str, Any], params: GateParams) -> list[str]:
    """Reasons from the gated ε lower bounds of one defender (violations and NOT AUDITED)."""
    where = f"audit.{defender}"
    bounds = audited_bounds(entry, where)
    gated = _gated_kinds(entry, [b.kind for b in bounds])
    findings = [f for f in check_bounds(claim, bounds, params.max_epsilon_excess) if f.bound.kind in gated]
    reasons = [f"{defender}: {f.reason}" for f in findings if f.violation]
    missing = [k for k in gated if k not in {b.kind for b in bounds}]
    comparable = [f for f in findings if f.comparable]
    if not bounds:
        reasons.append(
            f"{defender}: claimed ε = {fmt_value(claim.epsilon)} but no audited ε lower bound "
            "(whitebox, one_run, game3, lidp) is available to check it against gate.max_epsilon_excess = "
            f"{fmt_value(params.max_epsilon_excess)} {NOT_AUDITED}"
        )
    elif "budget" in entry and missing:
        reasons.append(
            f"{defender}: gated bound(s) {missing} missing from metrics/audit.json "
            f"(a failed or skipped audit stage); rerun `dvc repro` or remove them from gate.bounds {NOT_AUDITED}"
        )
    elif not comparable:
        notes = "; ".join(f.reason or "" for f in findings)
        reasons.append(
            f"{defender}: no gated bound is comparable with the claim "
            f"({fmt_value(claim.epsilon)}, {claim.delta:.3g}, {claim.neighbourhood}): {notes} {NOT_AUDITED}"
        )
    return reasons


def _evaluate_defender(
    defender: str,
    ltu_entry: Mapping[str, Any] | None,
    audit_entry: Mapping[str, Any] | None,
    bounds_entry: Mapping[str, Any] | None,
    params: GateParams,
) -> list[str]:
    """All failure reasons for one defender (empty list = pass)."""
    reasons: list[str] = []
    eb = params.use_error_bars

    # 1-2. LTU privacy and utility.
    if ltu_entry is None:
        reasons.append(
            f"{defender}: no LTU result in metrics/ltu.json, so privacy >= gate.min_privacy = "
            f"{fmt_value(params.min_privacy)} and utility >= gate.min_utility = "
            f"{fmt_value(params.min_utility)} cannot be shown"
        )
    else:
        where = f"ltu.{defender}"
        for attacker, result in _attacker_entries(defender, ltu_entry):
            sub_where = where if result is ltu_entry else f"{where}.attackers.{attacker}"
            reason = _check_score(
                defender,
                f"LTU privacy (attacker {attacker})",
                read_number(result, "privacy", sub_where),
                privacy_stderr(result, sub_where),
                params.min_privacy,
                "gate.min_privacy",
                eb,
            )
            if reason:
                reasons.append(reason)
        reason = _check_score(
            defender,
            "LTU utility",
            read_number(ltu_entry, "utility", where),
            read_number(ltu_entry, "utility_stderr", where),
            params.min_utility,
            "gate.min_utility",
            eb,
        )
        if reason:
            reasons.append(reason)

    # 3. Audited ε against the claim, like with like, within one error budget.
    claim = claim_of(audit_entry, f"audit.{defender}")
    claimed = claim.epsilon if claim is not None else None
    if audit_entry is None:
        reasons.append(
            f"{defender}: no entry in metrics/audit.json, so claimed_epsilon and the audited "
            f"ε lower bounds cannot be checked against gate.max_epsilon_excess = "
            f"{fmt_value(params.max_epsilon_excess)} {NOT_AUDITED}"
        )
    elif claim is not None:
        reasons.extend(_claim_reasons(defender, claim, audit_entry, params))

    # 4. Empirical accuracy against theoretical bounds.
    theory_gated = params.fail_on_theory_violation and "theory" in params.bounds
    if theory_gated and claim is not None and not _theory_not_comparable(bounds_entry):
        bounds = accuracy_bounds(defender, bounds_entry)
        accuracy = read_number(bounds_entry, "empirical_accuracy", f"bounds.{defender}")
        if bounds_entry is None or not bounds or accuracy is None:
            missing = (
                "no entry in metrics/bounds.json"
                if bounds_entry is None
                else "no finite theoretical bound"
                if not bounds
                else "no empirical_accuracy in metrics/bounds.json"
            )
            reasons.append(
                f"{defender}: claimed ε = {fmt_value(claimed)} but {missing}, so the theory check "
                "(gate.fail_on_theory_violation = true) cannot be done"
            )
        else:
            stderr = empirical_stderr(bounds_entry, ltu_entry, defender) if eb else None
            level = _budget_levels(audit_entry).get("theory", params.beta)
            z = theory_z(level, _attacker_count(ltu_entry))
            for kind, bound in theory_violations(bounds, accuracy, stderr, z).items():
                shown = (
                    f"empirical_accuracy - {z:.3g} stderr = {fmt_value(accuracy)} - {z:.3g} x {fmt_value(stderr)} = "
                    f"{fmt_value(accuracy - z * stderr)}"
                    if stderr
                    else f"empirical_accuracy = {fmt_value(accuracy)}"
                )
                reasons.append(
                    f"{defender}: {shown} > theoretical MI accuracy bound {kind} = "
                    f"{fmt_value(bound)} at claimed ε = {fmt_value(claimed)} "
                    "(gate.fail_on_theory_violation = true; implementation or accounting bug)"
                )
    return reasons


def evaluate_gate(
    ltu: Mapping[str, Any],
    audit: Mapping[str, Any],
    bounds: Mapping[str, Any],
    params: GateParams,
) -> dict[str, Any]:
    """Evaluate the release gate.

    Args:
        ltu: contents of ``metrics/ltu.json``.
        audit: contents of ``metrics/audit.json``.
        bounds: contents of ``metrics/bounds.json``.
        params: the ``gate.*`` thresholds.

    Returns:
        ``{"passed": bool, "reasons": [str], "defenders": {name: {"passed": bool,
        "reasons": [str]}}}`` (the ``metrics/gate.json`` contract). A defender passes iff it
        has no reason; the gate passes iff there is at least one defender and all pass. The
        top-level reasons are all defender reasons, each prefixed with the defender name.

    Raises:
        ValueError: a metrics object or value has the wrong type (the message names it).
    """
    if not isinstance(params, GateParams):
        raise ValueError(f"params must be a GateParams, got {type(params).__name__}")
    sources = {"ltu": ltu, "audit": audit, "bounds": bounds}
    for name, source in sources.items():
        if not isinstance(source, Mapping):
            raise ValueError(f"{name} metrics must be an object, got {type(source).__name__}")

    defenders: dict[str, dict[str, Any]] = {}
    all_reasons: list[str] = []
    for defender in defender_names(ltu, audit, bounds):
        reasons = _evaluate_defender(
            defender,
            as_mapping(ltu.get(defender), f"ltu.{defender}"),
            as_mapping(audit.get(defender), f"audit.{defender}"),
            as_mapping(bounds.get(defender), f"bounds.{defender}"),
            params,
        )
        defenders[defender] = {"passed": not reasons, "reasons": reasons}
        all_reasons.extend(reasons)
    if not defenders:
        all_reasons.append(
            "no defender found in metrics/ltu.json, metrics/audit.json or metrics/bounds.json"
        )
    return {
        "passed": bool(defenders) and all(d["passed"] for d in defenders.values()),
        "reasons": all_reasons,
        "defenders": defenders,
    }
