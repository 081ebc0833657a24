"""``metrics/summary.json``: the review-sized view of an audit that ``dvc metrics diff`` shows.

The four detailed metrics files hold several hundred leaves on the default audit (every attacker,
every audit block's diagnostics, the gate's provenance), too many for a reviewer to see what changed
between two audits. The summary keeps, per defender, only what decides a release:

- ``passed`` and the number of gate ``reasons`` (``metrics/gate.json``);
- the claim ``claimed_epsilon``, ``claimed_delta``, ``claimed_neighbourhood`` (left out when the defender
  claims no ε) and ``claimed_delta_log10`` (``dvc metrics diff --precision 3`` prints δ = 1e-5 as 0.0,
  which reads as a pure claim; −5 survives any precision; null for a pure claim, δ = 0);
- ``eps_hat``: the best (largest) ε lower bound per threat model, over the audit blocks' main
  bounds (``eps_lower_bound``, Game 3's ``eps_low``; not LiDP's diagnostic K = 1 view), and
  ``eps_hat_bound``, the block that gave it. A block's threat model is its own ``threat_model``
  field (``white-box: ...``, ``black-box: ...``) cut at the colon; LiDP and Game 3 record none and
  observe only the final models of their canary runs, so they count as black-box; and
  ``eps_hat_neighbourhood``, only where it differs from the claim's: what that bound certifies (a
  label-DP claim, ``replace_label``, is not comparable with the add/remove black-box ε̂ beside it);
- ``ltu``: the strongest LTU attacker's privacy and utility with their standard errors.

Bounds of one threat model may certify different neighbourhoods and δ (``game3``: label
replacement; ``one_run``: add/remove): the summary says which bound is largest, ``metrics/audit.json``
and the report say what it certifies.
"""

from __future__ import annotations

import math

from privaudit.verdict.metrics_files import (
    AuditEntry,
    AuditMetrics,
    DefenderSummary,
    GateResult,
    LtuSummary,
    MetricsSummary,
)

__all__ = ["MAIN_BOUND_KEYS", "build_summary", "best_epsilon_by_threat_model", "threat_model_key"]

#: the ε lower bound of each audit block that the summary takes (other keys are diagnostic views)
MAIN_BOUND_KEYS: tuple[str, ...] = ("eps_lower_bound", "eps_low")

#: blocks that record no ``threat_model``: both see only the final models of their canary runs
_FINAL_MODEL_BLOCKS = frozenset({"lidp", "game3"})


def threat_model_key(kind: str, threat_model: str | None) -> str:
    """``"white-box: every intermediate update visible"`` → ``"white_box"``; a block without one:
    ``"black_box"`` for LiDP and Game 3, ``"unspecified"`` otherwise."""
    if threat_model:
        return threat_model.split(":", 1)[0].strip().lower().replace("-", "_").replace(" ", "_")
    return "black_box" if kind in _FINAL_MODEL_BLOCKS else "unspecified"


def best_epsilon_by_threat_model(entry: AuditEntry) -> tuple[dict[str, float], dict[str, str]]:
    """``({threat model: best ε̂}, {threat model: block that gave it})`` of one ``audit.json`` entry.

    Ties go to the first block in :meth:`AuditEntry.epsilon_lower_bounds` order (white-box, one-run,
    LiDP, Game 3); absent or null bounds are left out.
    """
    best: dict[str, float] = {}
    source: dict[str, str] = {}
    for kind, where, block, eps in entry.epsilon_lower_bounds():
        if where.rsplit(".", 1)[-1] not in MAIN_BOUND_KEYS:
            continue
        key = threat_model_key(kind, block.threat_model)
        if key not in best or eps > best[key]:
            best[key], source[key] = eps, kind
    return best, source


def _neighbourhoods(entry: AuditEntry, source: dict[str, str]) -> dict[str, str] | None:
    """{threat model: the neighbourhood its ε̂ certifies} where that differs from the claim's (``None``: nowhere,
    or no claim)."""
    if entry.claimed_neighbourhood is None:
        return None
    found = {kind: block.neighbourhood for kind, _, block, _ in entry.epsilon_lower_bounds() if block.neighbourhood}
    differ = {tm: found[kind] for tm, kind in source.items()
              if kind in found and found[kind] != entry.claimed_neighbourhood}
    return differ or None


def build_summary(metrics: AuditMetrics, gate: GateResult) -> MetricsSummary:
    """The summary of one audit: every defender of the gate, in the gate's order (see the module doc)."""
    defenders: dict[str, DefenderSummary] = {}
    for name, verdict in gate.defenders.items():
        audit = metrics.audit.get(name)
        ltu = metrics.ltu.get(name)
        eps_hat, eps_hat_bound = best_epsilon_by_threat_model(audit) if audit is not None else ({}, {})
        defenders[name] = DefenderSummary(
            passed=verdict.passed,
            reasons=len(verdict.reasons),
            claimed_epsilon=audit.claimed_epsilon if audit is not None else None,
            claimed_delta=audit.claimed_delta if audit is not None else None,
            claimed_delta_log10=(round(math.log10(audit.claimed_delta), 6) if audit is not None
                                 and audit.claimed_delta else None),
            claimed_neighbourhood=audit.claimed_neighbourhood if audit is not None else None,
            eps_hat=eps_hat,
            eps_hat_bound=eps_hat_bound,
            eps_hat_neighbourhood=_neighbourhoods(audit, eps_hat_bound) if audit is not None else None,
            ltu=None if ltu is None else LtuSummary(
                attacker=ltu.strongest_attacker(), privacy=ltu.privacy, privacy_stderr=ltu.privacy_error(),
                utility=ltu.utility, utility_stderr=ltu.utility_stderr),
        )
    return MetricsSummary(passed=gate.passed, defenders=defenders)
