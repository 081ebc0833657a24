"""Build the report's sections from :class:`ReportInputs` (see :mod:`privaudit.report.document`).

Order: verdict, claims against the audited bounds, the privacy budget over releases (only with
``gate.total_budget`` or releases in the ledger), per-defender table, theoretical bounds, plots (with the most exposed sample
ids and ROC statistics), LTU Table 1, provenance manifest. Absent data gives a
"not computed in this audit" note, never an exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from privaudit.verdict.claim_check import audited_bounds, check_bounds
from privaudit.claims.error_budget import BOUND_LABELS
from privaudit.verdict.metrics_files import AuditEntry, DefenderVerdict, LidpBlock, LtuEntry
from privaudit.report.document import (
    MISSING,
    Cell,
    Figure,
    Note,
    Section,
    Table,
    Verdict,
    VerdictLine,
    cell,
    num,
    pm,
    real,
)
from privaudit.report.figures import PLOT_NAMES
from privaudit.report.first_screen import could_have_seen, defender_state, state_label, strongest_line
from privaudit.verdict.gate import NOT_AUDITED
from privaudit.report.inputs import ReportInputs
from privaudit.report.tables import (
    block_value,
    check_most_exposed,
    curve_stat,
    exposed_label,
    most_exposed,
    risk_note,
    risk_summary,
)
from privaudit.verdict.theory import theory_violations

__all__ = ["build_document", "could_have_seen"]

_BOUND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("thudi", "Thudi"),
    ("yeom", "Yeom"),
    ("erlingsson", "Erlingsson"),
    ("sablayrolles", "Sablayrolles"),
    ("izzo", "Izzo 1/2+η"),
)


def audited_what(inputs: ReportInputs) -> str | None:
    """One line for the first screen: which data, seed, code and params were audited (from the manifest).

    >>> from privaudit.verdict.metrics_files import AuditMetrics
    >>> m = {"params": {"dataset": {"name": "digits", "max_samples": None}}, "seed": 7, "code_revision": "abc123456789x"}
    >>> audited_what(ReportInputs(metrics=AuditMetrics(ltu={}, audit={}, bounds={}), manifest=m))
    'Audited: data set digits, base.seed 7, code abc123456789 (params and data hashes: Provenance manifest).'
    """
    man = inputs.manifest or {}
    dataset = (man.get("params") or {}).get("dataset") or {}
    name = dataset.get("name") or inputs.dataset
    if not man and name is None:
        return None
    parts = [f"data set {name}" if name else "data set not recorded"]
    if dataset.get("path"):
        parts[0] += f" ({dataset['path']})"
    if dataset.get("max_samples"):
        parts[0] += f", {dataset['max_samples']} rows sampled"
    if man.get("seed") is not None:
        parts.append(f"base.seed {man['seed']}")
    if man.get("code_revision"):
        dirty = " (uncommitted changes to code or params)" if man.get("code_dirty") else ""
        parts.append(f"code {str(man['code_revision'])[:12]}{dirty}")
    return "Audited: " + ", ".join(parts) + " (params and data hashes: Provenance manifest)."


def _flagged_note(inputs: ReportInputs, name: str) -> str | None:
    """``"8 of 500 training samples flagged by the per-sample risk test"`` (``None`` without risk scores)."""
    frame = (inputs.privacy_scores or {}).get(name)
    summary = None if frame is None else risk_summary(frame)
    if not summary or not summary.get("tested"):
        return None
    return f"{summary['flagged']} of {summary['tested']} training samples flagged by the per-sample risk test"


def _what_pass_means(inputs: ReportInputs, name: str) -> str:
    """The claim a defender's verdict is about, in words (the verdict table's "Claim" column)."""
    audit = inputs.metrics.audit.get(name)
    if audit is None or audit.claim is None:
        bb = None if audit is None or audit.blackbox is None else audit.blackbox.eps_lower_bound
        seen = f"; black-box ε̂ {num(real(bb))} is evidence of leakage, checked against nothing" if bb is not None else ""
        flagged = _flagged_note(inputs, name)
        return ("no DP claim: PASS means the LTU privacy and utility floors hold, nothing is certified" + seen
                + (f"; {flagged}" if flagged else ""))
    c = audit.claim
    delta = "pure (δ = 0)" if c.delta == 0 else f"δ = {c.delta:.3g}"
    text = f"ε = {num(c.epsilon, 3)}, {delta}, {c.neighbourhood}"
    tested = tested_against(audit, "blackbox") if audit.blackbox is not None else None
    return text + (f"; black-box tested against: {tested}" if tested else "")


def _why(inputs: ReportInputs, name: str, verdict: DefenderVerdict) -> list[str]:
    """The "why" of one defender: its strongest ε̂ against its claim first, then the gate's reasons."""
    strongest = strongest_line(inputs.metrics.audit.get(name))
    reasons = list(verdict.reasons) or (["all checks passed"] if strongest else ["LTU floors hold; no DP claim checked"])
    return ([strongest] if strongest else []) + reasons


def _verdict_line(inputs: ReportInputs, name: str, state: str) -> VerdictLine:
    """One defender's line under a passing verdict."""
    entry = inputs.metrics.audit.get(name)
    strongest = strongest_line(entry)
    if strongest is not None:
        seen = could_have_seen(entry)
        text = strongest + ("" if seen in ("—", "not computed") else f"; could have seen: {seen.split(' (')[0]}")
    else:
        flagged = _flagged_note(inputs, name)
        text = "no DP claim: only the LTU privacy and utility floors were checked" + (f"; {flagged}" if flagged else "")
    return VerdictLine(name, state, state_label(state), text)  # type: ignore[arg-type]


def _verdict_section(inputs: ReportInputs) -> Section:
    """The verdict: PASS/FAIL with the gate's reasons and warnings (under a PASS, one line per defender: its
    strongest ε̂ against its claim, or that it claims nothing), what was audited, and per-defender verdicts
    with the claim each is about, the why and what the audit could have seen."""
    gate = inputs.gate
    section = Section("Verdict")
    states: dict[str, str] = {}
    if gate is not None:
        for name, verdict in gate.defenders.items():
            states[name] = defender_state(inputs.metrics.audit.get(name), verdict,
                                          any(NOT_AUDITED in r for r in verdict.reasons))
    no_claim = bool(states) and all(s == "pass-noclaim" for s in states.values())
    lines = [_verdict_line(inputs, n, s) for n, s in states.items()] if gate is not None and gate.passed else []
    section.blocks.append(Verdict(None if gate is None else gate.passed, list(gate.reasons) if gate else [],
                                  list(gate.warnings) if gate else [],
                                  no_claim=bool(gate is not None and gate.passed and no_claim), lines=lines))
    if (what := audited_what(inputs)) is not None:
        section.blocks.append(Note(what))
    if gate is not None and gate.defenders:
        rows = []
        for name, verdict in gate.defenders.items():
            state = states[name]
            rows.append(
                [
                    cell(name),
                    cell(state_label(state), cls=_STATE_CLASS[state]),  # type: ignore[index]
                    cell(_what_pass_means(inputs, name)),
                    Cell(_why(inputs, name, verdict)),
                    cell(could_have_seen(inputs.metrics.audit.get(name))),
                ]
            )
        section.blocks.append(
            Table(["Defender", "Gate", "Claim", "Reasons", "Could have seen"], rows,
                  "Release gate per defender. Reasons: the strongest gated ε lower bound against the claim, then the "
                  "gate's reasons. PASS (no DP claim): the LTU floors hold; no ε is certified. Could have seen: "
                  "per gated bound, the smallest true ε it detects with probability ≥ 0.8 at the size it ran, for "
                  "an ideal canary (a real canary needs at least this); for the model-based white-box audit, the "
                  "true ε at which its certified lower end would pass the claim, at the relative width its "
                  "interval has here. A PASS says nothing about a true ε below these")
        )
    return section


#: the CSS class of each defender state's cell
_STATE_CLASS = {"pass": "pass", "pass-noclaim": "pass-noclaim", "fail": "fail", "not-audited": "fail"}


def _privacy_cell(entry: LtuEntry | None) -> Cell:
    """Per-attacker LTU privacy ± stderr, the strongest attacker marked."""
    if entry is None:
        return cell(MISSING, cls="muted")
    strongest = entry.strongest_attacker()
    lines = []
    for name, result in entry.per_attacker().items():
        top = result is entry
        mark = " (strongest)" if top or (name == strongest and not entry.has_top_level_result) else ""
        lines.append(f"{name}: {pm(real(result.privacy), real(result.privacy_stderr))}{mark}")
    return Cell(lines or ["—"], numeric=True)


def _claim_cell(audit: AuditEntry) -> Cell:
    """The claimed ε; with a black-box audit, what its gated bound tested the claim against."""
    claimed = audit.claimed_epsilon
    if claimed is None:
        return cell("none (not DP)", numeric=True)
    lines = [num(real(claimed), 2)]
    if audit.blackbox is not None and (tested := tested_against(audit, "blackbox")) is not None:
        lines.append(f"tested against: {tested}")
    return Cell(lines, numeric=len(lines) == 1)  # a numeric cell does not wrap


def _lidp_cell(lidp: LidpBlock | None) -> Cell:
    """LiDP ε̂ lower bounds (K = √n and K = 1) with trials, canaries and interval method."""
    if lidp is None:
        return cell(MISSING, cls="muted")
    lines = [
        f"K=√n: {num(real(lidp.eps_lower_bound))}",
        f"K=1: {num(real(lidp.eps_lower_bound_k1))}",
        f"n={num(lidp.trials)} trials, K={num(lidp.canaries)} canaries",
    ]
    order, method = lidp.order, lidp.method
    if order is not None or method is not None:
        interval = f"order {order}" if order is not None else "order ?"
        interval += f", {method}" if method is not None else ""
        if lidp.beta is not None:
            interval += f", β={float(lidp.beta):.3g}"  # 0.00833, not 0.008333333333333333 (issue 34)
        lines.append(f"interval: {interval}")
    else:
        lines.append("interval order/method: not recorded")
    return Cell(lines, numeric=True)


def _defender_section(inputs: ReportInputs) -> Section:
    """The per-defender table: utility, privacy per attacker, ε claims and audits."""
    section = Section("Per-defender results")
    names = inputs.defenders()
    if not names:
        section.blocks.append(Note(MISSING, missing=True))
        return section
    gate_defenders = inputs.gate.defenders if inputs.gate is not None else {}
    rows = []
    for name in names:
        ltu = inputs.metrics.ltu.get(name)
        audit = inputs.metrics.audit.get(name)
        verdict = gate_defenders[name].passed if name in gate_defenders else None
        game3 = audit.game3 if audit is not None else None
        if game3 is not None:
            g3 = cell(
                f"[{num(real(game3.eps_low))}, {num(real(game3.eps_high))}]",
                f"{num(game3.canaries)} canaries",
                numeric=True,
            )
        else:
            g3 = cell(MISSING, cls="muted")
        rows.append(
            [
                cell(name),
                cell("PASS", cls="pass")
                if verdict is True
                else cell("FAIL", cls="fail")
                if verdict is False
                else cell("—"),
                cell(pm(real(ltu.utility), real(ltu.utility_stderr)), numeric=True)
                if ltu is not None
                else cell(MISSING, cls="muted"),
                _privacy_cell(ltu),
                cell(MISSING, cls="muted")
                if audit is None
                else _claim_cell(audit),
                g3,
                _lidp_cell(audit.lidp if audit is not None else None),
            ]
        )
    section.blocks.append(
        Table(
            [
                "Defender",
                "Gate",
                "Utility ± s.e.",
                "LTU privacy ± s.e. per attacker",
                "Claimed ε",
                "Game-3 ε interval",
                "LiDP ε̂ (lower bound)",
            ],
            rows,
            "Utility (Eq. 2) and privacy (Eq. 1) of the LTU evaluator; ε lower bounds from Game 3 "
            "(Clopper-Pearson) and Lifted DP",
        )
    )
    section.blocks.append(_bounds_table(inputs, names))
    return section


#: the Threat model column's short label (the full sentence is in the table's notes)
_THREAT_SHORT = {
    "whitebox": "white-box", "one_run": "black-box, 1 run", "blackbox": "black-box, many runs",
    "blackbox_rate": "black-box, many runs", "lidp": "black-box, trial pairs", "lidp_k1": "black-box, trial pairs",
    "game3": "black-box, 1 run",
}

_THREAT = {
    "whitebox": "white-box: every intermediate update visible",
    "one_run": "black-box: final model only, one training run",
    "blackbox": "black-box: final models of many runs with / without one crafted canary",
    "blackbox_rate": "black-box: final models of many runs with / without one crafted canary",
    "lidp": "black-box: final models of many trial pairs",
    "lidp_k1": "black-box: final models of many trial pairs",
    "game3": "black-box: final model's predictions on label-flipped canaries",
}


#: what a bound other than the gated black-box one is compared with: the claim's (ε, δ) point
EPS_DELTA_POINT = "(eps, delta) point"
#: what an older ``blackbox`` block (no ``curve`` key) tested: its ε̂ was the GDP view
_OLD_BLACKBOX_CURVE = "Gaussian trade-off curve (GDP view; audit.json written before claim curves)"


def tested_against(entry: AuditEntry, kind: str) -> str | None:
    """What the claim is tested against by bound ``kind`` of ``entry``: the gated black-box bound's
    ``curve_description`` (``"(eps, delta) point"`` for the ``eps_delta`` curve), the (ε, δ) point for
    every other bound; ``None`` without a claim."""
    if entry.claim is None:
        return None
    bb = entry.blackbox
    if kind != "blackbox" or bb is None:
        return EPS_DELTA_POINT
    if bb.curve is None:
        return _OLD_BLACKBOX_CURVE
    if bb.curve == "eps_delta":
        return EPS_DELTA_POINT
    return bb.curve_description or bb.curve


def _assumption_and_notes(entry: AuditEntry, kind: str) -> tuple[str | None, list[str]]:
    """What a bound assumes beyond its threat model; beside the black-box ε̂ the certified point, the GDP
    view (a diagnostic) and the last-iterate ceiling."""
    if kind == "whitebox" and entry.whitebox is not None:
        return entry.whitebox.assumption, []
    bb = entry.blackbox
    if kind not in ("blackbox", "blackbox_rate") or bb is None:
        return None, []
    runs = f"{num(bb.runs_in)} + {num(bb.runs_out)} final models" if bb.runs_in is not None else ""
    notes = [runs] if runs else []
    if kind == "blackbox_rate":
        assumption = "none beyond independent runs"
    elif bb.curve is None:  # an older block: its ε̂ was the GDP view
        assumption = "the trade-off curve (canary in vs out) is Gaussian (GDP view)"
    else:
        tested = tested_against(entry, kind)
        assumption = (f"none beyond the claim: tested against {tested}" if tested is not None
                      else "none beyond independent runs (no claim: the assumption-free (eps, delta) bound)")
        fpr, fnr = block_value(bb, "claim_fpr_upper"), block_value(bb, "claim_fnr_upper")
        if fpr is not None and fnr is not None and bb.refutes_claimed_curve is not None:
            where = ("below the claimed curve: refutes it" if bb.refutes_claimed_curve
                     else "on or above the claimed curve")
            notes.append(f"certified point FPR ≤ {num(fpr)}, FNR ≤ {num(fnr)}: {where}")
        if bb.gdp_epsilon is not None:
            notes.append(f"GDP view ε ≈ {num(real(bb.gdp_epsilon))} (a diagnostic: assumes a Gaussian trade-off "
                         "curve; never gated)")
        if bb.gdp_warning:
            notes.append("⚠ the GDP view exceeds the claim, which declares no mechanism: see the warning under "
                         "the verdict")
    if bb.ceiling is not None:
        notes.append(f"last-iterate ceiling ε ≈ {num(bb.ceiling.eps)} (Steinke et al. 2024): what a final-model "
                     "audit of a linear DP-SGD head can reach at most; an ε̂ below the claim is not a pass of its own")
    return assumption, notes


def _claims_section(inputs: ReportInputs) -> Section:
    """Every ε lower bound against the claim: δ, neighbourhood, level, gated or diagnostic, threat model."""
    section = Section("DP claims against audited ε lower bounds")
    rows: list[list[Cell]] = []
    sentences: dict[str, str] = {}
    footnotes: list[str] = []
    for name in inputs.defenders():
        entry = inputs.metrics.audit.get(name)
        if entry is None:
            continue
        claim = entry.claim
        budget = entry.budget
        gated = set(budget.gated) if budget is not None else set()
        if budget is not None:
            share = budget.beta / max(1, len(gated))
            sentences[name] = (f"{name}: gate.beta = {budget.beta:g} split over {len(gated)} gated bound(s) "
                               f"({', '.join(BOUND_LABELS.get(k, k) for k in budget.gated)}) at "
                               f"{share:.3g} each (Bonferroni)" + (
                                   f"; diagnostic, not gated: {', '.join(budget.diagnostic)}"
                                   if budget.diagnostic else "") + ".")
        bounds = audited_bounds(entry)
        findings = check_bounds(claim, bounds) if claim else []
        by_kind = {f.bound.kind: f for f in findings}
        for b in bounds:
            f = by_kind.get(b.kind)
            status = ("not compared" if f is None or not f.comparable else "VIOLATION" if f.violation else "holds")
            assumption, notes = _assumption_and_notes(entry, b.kind)
            rows.append([
                cell(name), cell(BOUND_LABELS.get(b.kind, b.kind)),
                cell(num(b.epsilon), numeric=True),
                cell("—" if b.delta is None else f"{b.delta:.3g}", numeric=True),
                cell(b.neighbourhood or "—"),
                cell("—" if b.level is None else f"{b.level:.3g}", numeric=True),
                cell("gated" if (b.kind in gated or budget is None) else "diagnostic"),
                cell("no claim" if claim is None else "—" if f is None or f.compared_with is None
                     else num(f.compared_with.epsilon), numeric=True),
                cell("no claim" if claim is None else "—" if f is None or not f.comparable
                     else tested_against(entry, b.kind) or "—"),
                cell(status, cls="fail" if status == "VIOLATION" else "muted" if status != "holds" else "pass"),
                _threat_cell(footnotes, name, b.kind, [_THREAT.get(b.kind, "")]
                             + ([f"assumes: {assumption}"] if assumption else []) + notes
                             + ([f.reason] if f is not None and f.reason and not f.violation else [])),
            ])
    if not rows:
        section.blocks.append(Note(MISSING, missing=True))
        return section
    for text in sentences.values():
        section.blocks.append(Note(text))
    section.blocks.append(Table(
        ["Defender", "Bound", "ε̂", "δ", "Neighbourhood", "Level", "Gate", "Claim ε there", "Tested against",
         "Status", "Threat model"], rows,
        "Each bound is compared with the claim converted to the bound's neighbourhood (group privacy) at the "
        "bound's δ; its level is its share of gate.beta. The gated black-box bound tests its certified "
        "(FPR, FNR) point against the claim's own trade-off curve (the declared mechanism's, else the "
        "(eps, delta) polygon); the others compare ε̂ with the claim's (eps, delta) point. The threat model "
        "and what each bound assumes are in the numbered notes below"))
    for k, text in enumerate(footnotes, start=1):
        section.blocks.append(Note(f"[{k}] {text}"))
    return section


def _ledger_section(inputs: ReportInputs) -> Section | None:
    """The ledger of releases of the audited data set, the composed ε of each candidate with them under
    ``gate.total_budget`` and what is left; ``None`` (no section) without a budget and without releases."""
    block = inputs.gate.ledger if inputs.gate is not None else None
    if block is None and not inputs.releases:
        return None
    section = Section("Privacy budget over releases")
    if block is None:
        section.blocks.append(Note(
            "gate.total_budget is null: the releases below are listed, not composed with the candidates. Set "
            "gate.total_budget: {epsilon, delta} to fail a candidate that would exceed a total budget."))
    else:
        spent = "unbounded" if block.spent_epsilon is None else num(block.spent_epsilon)
        left = "none" if block.left_epsilon is None else num(block.left_epsilon)
        section.blocks.append(Note(
            f"Data set identity {block.identity!r}: {len(block.releases)} earlier release(s); budget "
            f"gate.total_budget ε = {num(block.budget_epsilon)} at δ = {block.budget_delta:.3g}; spent by the "
            f"releases so far (composed): ε = {spent}; left: ε = {left}."))
    if inputs.releases:
        section.blocks.append(Table(
            ["Release", "Defender", "Date (UTC)", "ε", "δ", "Neighbourhood", "Mechanism", "Data digest", "Audit commit"],
            [[cell(r.name), cell(r.defender), cell(r.date.strftime("%Y-%m-%d %H:%M")),
              cell(num(r.claim.epsilon), numeric=True), cell(f"{r.claim.delta:.3g}", numeric=True),
              cell(r.claim.neighbourhood.value), cell(r.claim.mechanism.kind if r.claim.mechanism else "—"),
              cell(r.dataset.digest[:12]), cell(r.audit.commit[:12])] for r in inputs.releases],
            "releases.yaml: the releases made from the same people's data (privaudit release <defender>)"))
    if block is not None and block.defenders:
        section.blocks.append(Table(
            ["Candidate", "Composed ε with the releases", "Budget ε", "Within budget"],
            [[cell(name), cell("∞ (unbounded at this δ)" if d.composed_epsilon is None
                               else num(d.composed_epsilon), numeric=True),
              cell(num(block.budget_epsilon), numeric=True),
              cell("yes" if d.within_budget else "NO", cls="pass" if d.within_budget else "fail")]
             for name, d in block.defenders.items()],
            f"Each candidate's claim composed with every release above at δ = {block.budget_delta:.3g} "
            "(optimal composition of the (ε, δ) points, Kairouz et al. 2015; PLD composition of declared mechanisms)"))
    return section


def _threat_cell(footnotes: list[str], name: str, kind: str, lines: list[str]) -> Cell:
    """A short threat-model label and a note number; the full text (threat model, assumption, notes) is appended
    to ``footnotes`` once per distinct text, so the table keeps one line per row."""
    text = "; ".join(line for line in lines if line)
    label = _THREAT_SHORT.get(kind, kind)
    if not text:
        return Cell([label])
    entry = f"{name}, {BOUND_LABELS.get(kind, kind)}: {text}"
    if entry not in footnotes:
        footnotes.append(entry)
    return Cell([f"{label} [{footnotes.index(entry) + 1}]"])


def _bounds_table(inputs: ReportInputs, names: list[str]) -> Table | Note:
    """Theoretical MI accuracy upper bounds beside the empirical attack accuracy, flagged."""
    metrics = inputs.metrics
    if not metrics.bounds:
        return Note(f"Theoretical membership-inference bounds: {MISSING}.", missing=True)
    rows = []
    for name in names:
        entry = metrics.bounds.get(name)
        if entry is None:
            rows.append(
                [cell(name), cell(MISSING, cls="muted")]
                + [cell("—") for _ in range(len(_BOUND_COLUMNS) + 1)]
            )
            continue
        audit = metrics.audit.get(name)
        claimed = real(audit.claimed_epsilon) if audit is not None else None
        accuracy = real(entry.empirical_accuracy)
        stderr = real(entry.accuracy_error(metrics.ltu.get(name)))
        bounds = entry.accuracy_bounds()
        exceeded = theory_violations(bounds, accuracy) if accuracy is not None else {}
        significant = theory_violations(bounds, accuracy, stderr) if accuracy is not None else {}
        row = [cell(name), cell(pm(accuracy, stderr), numeric=True)]
        for key, _title in _BOUND_COLUMNS:
            value = bounds.get(key)
            if value is None:
                row.append(cell("—", cls="muted"))
            elif key in exceeded:
                note = "⚠ EXCEEDED" if key in significant else "⚠ exceeded (within 1 s.e.)"
                row.append(cell(num(value), note, cls="flag", numeric=True))
            else:
                row.append(cell(num(value), numeric=True))
        if claimed is None:
            status = cell("no DP claim: no bound applies", cls="muted")
        elif exceeded:
            status = cell("empirical > theoretical: implementation or accounting bug", cls="flag")
        elif not bounds:
            status = cell(MISSING, cls="muted")
        else:
            status = cell("consistent", cls="pass")
        row.append(status)
        rows.append(row)
    return Table(
        ["Defender", "Empirical attack accuracy ± s.e."]
        + [t for _, t in _BOUND_COLUMNS]
        + ["Check"],
        rows,
        "Upper bounds on membership-inference accuracy implied by the claimed ε (p = 1/2); "
        "Izzo: 1/2 + η(ε). A bound below the empirical accuracy is flagged.",
    )


def _plots_section(
    inputs: ReportInputs, pngs: Mapping[str, bytes | None], top_k: int
) -> list[Section]:
    """One subsection per figure, with exposed-id and ROC tables."""
    sections = [Section("Plots")]
    captions = {
        "privacy_utility": "One point per defender and attacker; error bars are ± 1 standard error.",
        "epsilon_vs_trials": "LiDP ε lower bound with K = 1 vs K = √n canaries per trial; dashed: claimed ε.",
        "tradeoff": "One row per defender with a black-box audit and a claim comparable with it (add/remove). "
        "x: false-positive rate α, y: false-negative rate β of the threshold test 'canary in' over the final "
        "models. Blue: the claim's trade-off curve (its declared mechanism's, else the (ε, δ) polygon); shaded: "
        "what the claim excludes. ✕: the certified point the gate tested (upper confidence bounds on both rates; "
        "the true rates lie in its dashed box): in the shaded region it refutes the claim. Purple: the GDP view's "
        "threshold, observed rates up to their upper bounds (a diagnostic, never gated). Dashed orange, DP-SGD "
        "only: the last-iterate ceiling's Gaussian curve G_μ, about the most a final-model audit can reach. "
        "Right: the low-FPR corner, 1 − FNR against FPR on log-log axes.",
        "privacy_scores": "Per-sample privacy risk: each sample's LiRA log-likelihood ratio IN vs OUT (x) against "
        "−log10 of its p-value versus reference models that never saw it (y); dashed: the cutoff after the "
        "multiplicity correction; red: flagged Defender samples with bootstrap intervals; grey: Reserved samples "
        "(never trained on), the negative control. Ids only, never sample contents.",
        "roc": "Log-log ROC; grey verticals at 0.1 % and 1 % FPR.",
    }
    for name, title in PLOT_NAMES.items():
        sub = Section(title, level=3)
        data = pngs.get(name)
        if data is None:
            sub.blocks.append(Note(MISSING, missing=True))
        else:
            sub.blocks.append(Figure(name, title, data, captions[name]))
        if name == "privacy_scores" and inputs.privacy_scores and top_k == 0:
            sub.blocks.append(Note("Most exposed sample ids: not listed (report.most_exposed = 0)."))
        elif name == "privacy_scores" and inputs.privacy_scores:
            rows = []
            for defender, top in most_exposed(inputs.privacy_scores, top_k).items():
                summary = risk_summary(inputs.privacy_scores[defender])
                if summary is None:  # a scores file without per-sample risk (older runs)
                    ids = [f"{r.id} ({r.role}, {num(float(r.score))})" for r in top.itertuples()] or ["—"]
                else:  # flagged Defender samples only; a Reserved sample is never listed
                    ids = [exposed_label(r) for r in top.itertuples()] or ["none significant"]
                rows.append([cell(defender), Cell(ids), cell(risk_note(summary))])
            sub.blocks.append(Table(
                ["Defender", "Most exposed sample ids", "Selection (risk [interval], p, q) and negative control"],
                rows))
        if name == "roc" and inputs.roc:
            rows = []
            for defender, per_attacker in inputs.roc.items():
                for attacker, curve in per_attacker.items():
                    rows.append(
                        [
                            cell(defender),
                            cell(attacker),
                            cell(num(real(curve.get("auc"))), numeric=True),
                            cell(num(curve_stat(curve, "tpr_at_0_1pct", 1e-3), 4), numeric=True),
                            cell(num(curve_stat(curve, "tpr_at_1pct", 1e-2), 4), numeric=True),
                        ]
                    )
            sub.blocks.append(
                Table(["Defender", "Attacker", "AUC", "TPR @ 0.1% FPR", "TPR @ 1% FPR"], rows)
            )
        sections.append(sub)
    return sections


def _frame_table(frame: pd.DataFrame) -> Table:
    """A DataFrame as a table (floats with 3 decimals)."""
    rows = []
    for record in frame.itertuples(index=False):
        rows.append(
            [
                cell(num(v) if isinstance(v, float) else v, numeric=isinstance(v, float))
                for v in record
            ]
        )
    return Table([str(c) for c in frame.columns], rows)


_TABLE1_KEYS = ("model", "randomness", "utility", "privacy")


def _table1_pivot(frame: pd.DataFrame) -> Table:
    """Pedersen et al. 2022 Table 1 layout: one row per model, Utility and Privacy (± s.e.) per
    randomness level, levels in first-seen order."""
    levels = list(dict.fromkeys(frame["randomness"]))
    header = ["model"] + [f"{lv} {what}" for lv in levels for what in ("utility", "privacy")]
    rows = []
    for model, group in frame.groupby("model", sort=False):
        by_level = {r["randomness"]: r for r in group.to_dict("records")}
        row: list[Cell] = [cell(model)]
        for lv in levels:
            r = by_level.get(lv)
            for what in ("utility", "privacy"):
                if r is None:
                    row.append(cell(MISSING, numeric=True))
                else:
                    row.append(cell(pm(r[what], r.get(f"{what}_stderr")), numeric=True))
        rows.append(row)
    return Table(header, rows)


def _table1_section(inputs: ReportInputs) -> Section:
    """The LTU Table 1 reproduction (model × randomness → utility, privacy), one table per data set."""
    section = Section("LTU Table 1 reproduction")
    tables = {k: v for k, v in inputs.table1_by_dataset().items() if not v.empty}
    if inputs.table1_left_out:
        section.blocks.append(Note(
            f"Not shown: the reproduction(s) of {', '.join(inputs.table1_left_out)} listed in report.table1, "
            f"which belong to another data set than this audit's ({inputs.dataset or 'unknown'}); "
            "set report.table1_other_datasets: true to show them."))
    if not tables:
        section.blocks.append(Note(MISSING, missing=True))
        return section
    section.blocks.append(Note(
        "Utility (Eq. 2) and Privacy (Eq. 1) ± standard error of the trainer-based LTU attacker "
        "(`retrain`, Fig. 2 branch 3) per sklearn model and randomness level: fixed = fixed seed "
        "and data order; shuffled = random order; unseeded = random seed. Theorem 3: deterministic, "
        "order-invariant trainers have Privacy 0. The utility error here is Eq. 2's as the paper prints it, "
        "c·sqrt(A(1−A)/n), reproduced as published; it is (c − 1) times the standard error of the score, "
        "c/(c − 1)·sqrt(A(1−A)/n), which the gate and the per-defender tables use."
    ))
    for name, frame in tables.items():
        if name:
            runs = ""
            if {"trials", "rounds"} <= set(frame.columns):
                t, r = sorted(set(frame["trials"])), sorted(set(frame["rounds"]))
                runs = f" ({'/'.join(map(str, t))} trials × {'/'.join(map(str, r))} rounds)"
            section.blocks.append(Note(f"{name}{runs}"))
        has_keys = set(_TABLE1_KEYS) <= set(frame.columns)
        section.blocks.append(_table1_pivot(frame) if has_keys else _frame_table(frame))
    return section


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested dict → dotted keys; lists and other values as compact JSON / str."""
    items: list[tuple[str, str]] = []
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            items.extend(_flatten(value, name))
        elif isinstance(value, (list, tuple, Mapping)):
            items.append((name, json.dumps(value, default=str, ensure_ascii=False)))
        else:
            items.append((name, "—" if value is None else str(value)))
    return items


def _manifest_section(inputs: ReportInputs) -> Section:
    """The provenance manifest as a key/value table."""
    section = Section("Provenance manifest")
    if not inputs.manifest:
        section.blocks.append(Note(MISSING, missing=True))
    else:
        rows = [[cell(k), cell(v)] for k, v in _flatten(inputs.manifest)]
        section.blocks.append(Table(["Key", "Value"], rows))
    return section


def build_document(
    inputs: ReportInputs, pngs: Mapping[str, bytes | None], most_exposed: int = 10
) -> list[Section]:
    """The report as a list of sections (shared by the HTML and Markdown renderers).

    Args:
        inputs: the report inputs.
        pngs: rendered figures by name (``None`` or absent: "not computed").
        most_exposed: how many of the most exposed sample ids to list per defender (0: none).

    Raises:
        ValueError: ``most_exposed`` is not an integer >= 0.
    """
    check_most_exposed(most_exposed)
    ledger = _ledger_section(inputs)
    return [
        _verdict_section(inputs),
        _claims_section(inputs),
        *([ledger] if ledger is not None else []),
        _defender_section(inputs),
        *_plots_section(inputs, pngs, most_exposed),
        _table1_section(inputs),
        _manifest_section(inputs),
    ]
