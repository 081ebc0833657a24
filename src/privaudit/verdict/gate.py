"""Release gate: turn the audit metrics into a pass/fail verdict.

``evaluate_gate`` reads the three metrics files of the pipeline (``metrics/ltu.json``,
``metrics/audit.json``, ``metrics/bounds.json``, shapes fixed in docs/architecture.md, "Metrics
contracts") and returns the ``metrics/gate.json`` object
``{passed, reasons, defenders: {name: {passed, reasons}}}``, plus ``warnings`` when there is one
(see "Warnings" below).

Checks, per defender (every defender named in any of the three files):

1. **Privacy** (LTU, Eq. 1 of Pedersen et al. 2022): every attacker's privacy score must be
   at least ``gate.min_privacy``; the weakest score is the one of the strongest attacker.
2. **Utility** (Eq. 2): the utility score must be at least ``gate.min_utility``.
3. **Claimed ε**: when the defender claims (ε, δ)-DP, no *gated* audited ε lower bound
   (``budget.gated`` of its ``metrics/audit.json`` entry, from ``gate.bounds``: white-box
   ``whitebox.eps_lower_bound``, black-box ``one_run.eps_lower_bound``, LiDP
   ``lidp.eps_lower_bound`` / ``eps_lower_bound_k1``, Game 3 ``game3.eps_low``) may exceed the claim
   converted to the bound's neighbourhood at the bound's δ (:mod:`privaudit.verdict.claim_check`) plus
   ``gate.max_epsilon_excess``, and no white-box assumption check may have failed. Each bound is
   computed at its share of ``gate.beta`` (:mod:`privaudit.claims.error_budget`), so a claim that holds
   is flagged with probability at most ``gate.beta``. A gated bound that applies but is missing,
   or a claim no gated bound is comparable with, fails with a reason marked ``[NOT AUDITED]``:
   the gate is never quieter than its audit. (Entries written before the budget existed gate
   every bound present, compared as for the claim's own neighbourhood and δ.)
4. **Theory** (``gate.fail_on_theory_violation`` and ``theory`` in ``gate.bounds``): the
   empirical attack accuracy (the maximum over A attackers) must not exceed any theoretical
   membership-inference accuracy upper bound implied by the claim for the LTU swap game
   (Thudi, Yeom, Erlingsson, Sablayrolles, and Izzo's 1/2 + η) by more than z standard errors,
   z = max(2, Φ⁻¹(1 − level/A)) with ``level`` the theory check's budget share
   (:func:`privaudit.verdict.theory.theory_check`, the same check as ``exceeds_theory`` in
   ``metrics/bounds.json``). Exceeding a bound that holds for every attacker
   means the implementation or the privacy accounting is wrong.
5. **Total budget** (``gate.total_budget``, optional): the defender's claim composed with every earlier
   release of the same data set identity in ``releases.yaml`` must not exceed the budget's ε at its δ
   (:mod:`privaudit.verdict.total_budget`); a defender without a DP claim fails under a budget.

Error bars (``gate.use_error_bars``). A release gate must not be easier to pass with a
*smaller* audit. Comparing ``privacy + stderr`` with the threshold would do exactly that:
fewer LTU rounds give a larger standard error and so a higher optimistic score. The gate
therefore uses the *pessimistic* one-standard-error bound for the requirements the recipe
has to demonstrate (``privacy - stderr >= min_privacy``, ``utility - stderr >= min_utility``),
and requires the evidence of a bug to be beyond z error bars before calling a theory
violation (``accuracy - z stderr > bound``). The audited ε values are already one-sided
lower confidence bounds, so they are compared as they are. With ``use_error_bars: false``
all comparisons use point estimates.

The inputs are the typed metrics files (:class:`privaudit.verdict.metrics_files.AuditMetrics`, read by
:func:`privaudit.verdict.metrics_files.read_metrics`: a value of the wrong type is rejected there, naming
the file and key). Missing data fails the defender with a reason saying what is missing: a defender
without an LTU result, without a utility, without an ε audit while claiming DP, or without
theoretical bounds while claiming DP (when theory violations are gated).

Warnings (``warnings`` of ``metrics/gate.json``, ``"defender <name>: <text>"``): every non-null
``blackbox.gdp_warning`` of ``metrics/audit.json`` (the black-box GDP view exceeds a claim that
declares no mechanism: a refutation if the trainer adds Gaussian noise, nothing for other
mechanisms), and every ``blackbox.reduced`` (the audit ran fewer runs per side than the params'
default, chosen to fit ``compute.budget_minutes``: the ε it can still detect, and at the default size). A warning never changes pass/fail; ``privaudit verdict`` and the report's verdict
show it right after the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from privaudit.verdict.claim_check import audited_bounds, check_bounds
from privaudit.claims.claim import PrivacyClaim
from privaudit.claims.error_budget import EPSILON_BOUNDS
from privaudit.claims.registry import AUDITS
from privaudit.verdict.metrics_files import (
    AttackerResult,
    AuditEntry,
    AuditMetrics,
    DefenderVerdict,
    GateResult,
    LtuEntry,
)
from privaudit.verdict.theory import theory_check
from privaudit.verdict.total_budget import LedgerContext, ledger_block

#: marks a reason saying that a DP claim could not be audited (the report shows it in red)
NOT_AUDITED = "[NOT AUDITED]"

__all__ = ["NOT_AUDITED", "GateSettings", "evaluate_gate", "fmt_value"]


class GateSettings(Protocol):
    """What the gate reads of ``gate.*`` (:class:`privaudit.config.GateParams` is one; the gate imports no
    params module, so the verdict stays below the configuration that is built from it)."""

    @property
    def min_privacy(self) -> float: ...
    @property
    def min_utility(self) -> float: ...
    @property
    def max_epsilon_excess(self) -> float: ...
    @property
    def fail_on_theory_violation(self) -> bool: ...
    @property
    def use_error_bars(self) -> bool: ...
    @property
    def beta(self) -> float: ...
    @property
    def bounds(self) -> Sequence[str]: ...


def fmt_value(value: float) -> str:
    """Format a number for a reason string (4 significant digits)."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def _attacker_results(entry: LtuEntry) -> list[tuple[str, AttackerResult]]:
    """The LTU results to check for one defender: the top level and every attacker.

    The top level is the strongest attacker per docs/architecture.md ("Metrics contracts");
    checking every attacker as well makes the gate hold even if the producer's notion of
    "strongest" differs from ours. Duplicates of the top-level attacker are dropped.
    """
    results: list[tuple[str, AttackerResult]] = []
    if entry.has_top_level_result or not entry.attackers:
        results.append((entry.attacker if entry.attacker is not None else "strongest", entry))
    for name, result in entry.attackers.items():
        if entry.attacker is not None and name == entry.attacker and results:
            continue
        results.append((name, result))
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


def _gated_kinds(entry: AuditEntry, present: list[str]) -> list[str]:
    """The bound kinds the gate compares: ``budget.gated``, or every bound present (older files)."""
    if entry.budget is None:
        return present
    return [k for k in entry.budget.gated if k in EPSILON_BOUNDS]


def _claim_reasons(defender: str, claim: PrivacyClaim, entry: AuditEntry, params: GateSettings) -> list[str]:
    """Reasons from the gated ε lower bounds of one defender (violations and NOT AUDITED)."""
    bounds = audited_bounds(entry)
    gated = _gated_kinds(entry, [b.kind for b in bounds])
    findings = [f for f in check_bounds(claim, bounds, params.max_epsilon_excess) if f.bound.kind in gated]
    reasons = [f"{defender}: {f.reason}" for f in findings if f.violation]
    unrun = {b.kind for a in AUDITS if a.name in entry.not_audited for b in a.bounds}  # named by _not_audited_reasons
    missing = [k for k in gated if k not in {b.kind for b in bounds} and k not in unrun]
    comparable = [f for f in findings if f.comparable]
    if not bounds and not unrun:  # (audits that could not run are named, with their reason, by _not_audited_reasons)
        reasons.append(
            f"{defender}: claimed ε = {fmt_value(claim.epsilon)} but no audited ε lower bound "
            f"({', '.join(EPSILON_BOUNDS)}) is available to check it against gate.max_epsilon_excess = "
            f"{fmt_value(params.max_epsilon_excess)} {NOT_AUDITED}"
        )
    elif entry.budget is not None and missing:
        reasons.append(
            f"{defender}: gated bound(s) {missing} missing from metrics/audit.json "
            f"(a failed or skipped audit stage); rerun `dvc repro` or remove them from gate.bounds {NOT_AUDITED}"
        )
    elif not comparable and (bounds or not unrun):
        listed = list(entry.budget.gated) if entry.budget is not None else []
        notes = "; ".join(f.reason for f in findings if f.reason) or (
            f"gate.bounds gates no ε lower bound (it gates {', '.join(listed) or 'nothing'}; the audits computed "
            f"{', '.join(b.kind for b in bounds) or 'none'})" if not findings else "")
        reasons.append(
            f"{defender}: no gated bound is comparable with the claim "
            f"({fmt_value(claim.epsilon)}, {claim.delta:.3g}, {claim.neighbourhood}): {notes} {NOT_AUDITED}"
        )
    return reasons


def _not_audited_reasons(defender: str, entry: AuditEntry) -> list[str]:
    """An audit that applied but could not run (the defender's scores were unusable) fails the defender as NOT
    AUDITED, claim or not: what the audit would have shown is unknown, so the gate cannot pass it."""
    return [f"{defender}: the {audit} audit could not run: {reason} {NOT_AUDITED}"
            for audit, reason in sorted(entry.not_audited.items())]


def _ltu_reasons(defender: str, entry: LtuEntry | None, params: GateSettings) -> list[str]:
    """1-2. LTU privacy of every attacker and utility."""
    if entry is None:
        return [
            f"{defender}: no LTU result in metrics/ltu.json, so privacy >= gate.min_privacy = "
            f"{fmt_value(params.min_privacy)} and utility >= gate.min_utility = "
            f"{fmt_value(params.min_utility)} cannot be shown"
        ]
    eb = params.use_error_bars
    checks = [
        (f"LTU privacy (attacker {attacker})", result.privacy, result.privacy_error(), params.min_privacy,
         "gate.min_privacy")
        for attacker, result in _attacker_results(entry)
    ]
    checks.append(("LTU utility", entry.utility, entry.utility_stderr, params.min_utility, "gate.min_utility"))
    reasons = [_check_score(defender, label, value, stderr, threshold, param, eb)
               for label, value, stderr, threshold, param in checks]
    return [r for r in reasons if r]


def _theory_reasons(
    defender: str, claim: PrivacyClaim | None, metrics: AuditMetrics, params: GateSettings
) -> list[str]:
    """4. Empirical accuracy against the theoretical bounds implied by the claim (an (ε, δ) claim, or the
    η of an η-MIP recipe, whose bound is 1/2 + η: Izzo et al. 2023 Definition 1)."""
    ltu_entry, bounds_entry = metrics.ltu.get(defender), metrics.bounds.get(defender)
    if bounds_entry is not None and bounds_entry.comparable is False:
        return []  # bounds.json marks a claim whose neighbourhood says nothing about the LTU (swap) game
    bounds = bounds_entry.accuracy_bounds() if bounds_entry is not None else {}
    accuracy = bounds_entry.empirical_accuracy if bounds_entry is not None else None
    if bounds_entry is None or not bounds or accuracy is None:
        missing = (
            "no entry in metrics/bounds.json"
            if bounds_entry is None
            else "no finite theoretical bound"
            if not bounds
            else "no empirical_accuracy in metrics/bounds.json"
        )
        what = f"ε = {fmt_value(claim.epsilon)}" if claim is not None else "η (MIP)"
        return [
            f"{defender}: claimed {what} but {missing}, so the theory check "
            "(gate.fail_on_theory_violation = true) cannot be done"
        ]
    audit_entry = metrics.audit.get(defender)
    levels = audit_entry.budget.levels if audit_entry is not None and audit_entry.budget is not None else {}
    exceeded, z, stderr = theory_check(bounds_entry, ltu_entry, level=levels.get("theory", params.beta),
                                       use_error_bars=params.use_error_bars)
    reasons = []
    for kind, bound in exceeded.items():
        shown = (
            f"empirical_accuracy - {z:.3g} stderr = {fmt_value(accuracy)} - {z:.3g} x {fmt_value(stderr)} = "
            f"{fmt_value(accuracy - z * stderr)}"
            if stderr
            else f"empirical_accuracy = {fmt_value(accuracy)}"
        )
        at = (f"claimed ε = {fmt_value(claim.epsilon)}" if claim is not None
              else f"claimed MIP η = {fmt_value(bounds_entry.mip_eta)}")
        reasons.append(
            f"{defender}: {shown} > theoretical MI accuracy bound {kind} = "
            f"{fmt_value(bound)} at {at} "
            "(gate.fail_on_theory_violation = true; implementation or accounting bug)"
        )
    return reasons


def _warnings(defender: str, metrics: AuditMetrics) -> list[str]:
    """The defender's warnings (never a failure): its black-box GDP-view warning, and a black-box audit
    smaller than the params' default (with the ε it can still detect), if any."""
    entry = metrics.audit.get(defender)
    blackbox = entry.blackbox if entry is not None else None
    if blackbox is None:
        return []
    out = [f"defender {defender}: {blackbox.gdp_warning}"] if blackbox.gdp_warning else []
    if blackbox.reduced is not None:
        out.append(f"defender {defender}: {blackbox.reduced.text()}")
    return out


def _evaluate_defender(defender: str, metrics: AuditMetrics, params: GateSettings) -> list[str]:
    """All failure reasons for one defender (empty list = pass)."""
    reasons = _ltu_reasons(defender, metrics.ltu.get(defender), params)

    # 3. Audited ε against the claim, like with like, within one error budget.
    audit_entry = metrics.audit.get(defender)
    claim = audit_entry.claim if audit_entry is not None else None
    if audit_entry is None:
        reasons.append(
            f"{defender}: no entry in metrics/audit.json, so claimed_epsilon and the audited "
            f"ε lower bounds cannot be checked against gate.max_epsilon_excess = "
            f"{fmt_value(params.max_epsilon_excess)} {NOT_AUDITED}"
        )
    else:
        reasons.extend(_not_audited_reasons(defender, audit_entry))
        if claim is not None:
            reasons.extend(_claim_reasons(defender, claim, audit_entry, params))

    bounds_entry = metrics.bounds.get(defender)
    claims_eta = claim is None and bounds_entry is not None and bounds_entry.mip_eta is not None
    if (claim is not None or claims_eta) and params.fail_on_theory_violation and "theory" in params.bounds:
        reasons.extend(_theory_reasons(defender, claim, metrics, params))
    return reasons


def _claims(metrics: AuditMetrics) -> dict[str, PrivacyClaim | None]:
    """Every defender's DP claim (``None``: none, or no ``metrics/audit.json`` entry)."""
    return {d: (e.claim if (e := metrics.audit.get(d)) is not None else None) for d in metrics.defenders()}


def evaluate_gate(metrics: AuditMetrics, params: GateSettings, ledger: LedgerContext | None = None) -> GateResult:
    """Evaluate the release gate.

    Args:
        metrics: ``metrics/ltu.json``, ``metrics/audit.json`` and ``metrics/bounds.json``
            (:func:`privaudit.verdict.metrics_files.read_metrics`).
        params: the ``gate.*`` thresholds.
        ledger: with ``gate.total_budget`` set, the budget and the earlier releases of the audited data set
            (:mod:`privaudit.verdict.total_budget`): each defender's claim composed with them must stay within
            the budget, and the result carries the ``ledger`` block. ``None``: no budget (the result is what it
            was before the ledger existed).

    Returns:
        The ``metrics/gate.json`` verdict, without provenance. A defender (every defender named in
        any of the three files) passes iff it has no reason; the gate passes iff there is at least
        one defender and all pass. The top-level reasons are all defender reasons, each prefixed
        with the defender name. ``warnings`` lists every black-box ``gdp_warning`` as
        ``"defender <name>: <text>"``; it never changes pass/fail.
    """
    defenders: dict[str, DefenderVerdict] = {}
    all_reasons: list[str] = []
    warnings: list[str] = []
    block, budget_reasons = ledger_block(_claims(metrics), ledger) if ledger is not None else (None, {})
    for defender in metrics.defenders():
        reasons = _evaluate_defender(defender, metrics, params) + budget_reasons.get(defender, [])
        defenders[defender] = DefenderVerdict(passed=not reasons, reasons=tuple(reasons))
        all_reasons.extend(reasons)
        warnings.extend(_warnings(defender, metrics))
    if not defenders:
        all_reasons.append(
            "no defender found in metrics/ltu.json, metrics/audit.json or metrics/bounds.json"
        )
    return GateResult(
        passed=bool(defenders) and all(d.passed for d in defenders.values()),
        reasons=tuple(all_reasons),
        defenders=defenders,
        warnings=tuple(warnings),
        ledger=block,
    )
