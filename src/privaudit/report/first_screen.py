"""What the report's first screen and ``privaudit verdict`` say per defender, beside PASS / FAIL.

- :func:`strongest_bound`: a claiming defender's strongest gated ε lower bound against the claim it is
  compared with (the claim converted to the bound's neighbourhood, :func:`privaudit.verdict.claim_check.check_bounds`),
  "strongest" meaning the largest ratio ε̂ / claimed ε;
- :func:`could_have_seen`: per gated ε bound, the smallest true ε the audit detects at the size it ran
  (``detectable_epsilon`` of the black-box, one-run and Game-3 blocks, :mod:`privaudit.stats.detectable`) and,
  for the model-based white-box audit, its resolution :func:`whitebox_resolution`;
- :func:`defender_state`: ``pass`` (a claim was audited and holds), ``pass-noclaim`` (PASS without a DP claim:
  only the LTU floors were checked, nothing is certified), ``fail`` or ``not-audited``.

Pure: typed metrics in, plain strings out (no matplotlib, no pandas), so the CLI can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from privaudit.verdict.claim_check import audited_bounds, check_bounds
from privaudit.verdict.metrics_files import AuditEntry, DefenderVerdict
from privaudit.claims.registry import BOUND_LABELS

__all__ = [
    "DefenderState",
    "StrongestBound",
    "could_have_seen",
    "defender_state",
    "state_label",
    "largest_gated_bound",
    "strongest_bound",
    "strongest_line",
    "whitebox_resolution",
]

DefenderState = Literal["pass", "pass-noclaim", "fail", "not-audited"]

#: the words each state shows (the report's chip and the CLI's column)
_STATE_LABELS: dict[str, str] = {
    "pass": "PASS",
    "pass-noclaim": "PASS (no DP claim)",
    "fail": "FAIL",
    "not-audited": "NOT AUDITED",
}

#: the bounds whose blocks carry ``detectable_epsilon`` (privaudit.stats.detectable), in report wording
_DETECTABLE: dict[str, str] = {"blackbox": "black-box", "one_run": "one-run", "game3": "Game 3"}

#: gated ε bounds without a power figure, and why
_NO_POWER: dict[str, str] = {
    "lidp": "LiDP: no power figure (it depends on the canaries' correlation)",
}


@dataclass(frozen=True)
class StrongestBound:
    """The gated ε lower bound closest to (or furthest past) the claim it is compared with."""

    kind: str
    label: str
    epsilon: float
    claim_epsilon: float
    violation: bool

    @property
    def share(self) -> float:
        """ε̂ as a fraction of the compared claimed ε (∞ for ε̂ > 0 against a claim of 0)."""
        if self.claim_epsilon > 0:
            return self.epsilon / self.claim_epsilon
        return 0.0 if self.epsilon <= 0 else math.inf


def _gated(entry: AuditEntry) -> set[str] | None:
    """The gated bound kinds of ``entry`` (``None``: no budget recorded, every bound counts)."""
    return None if entry.budget is None else set(entry.budget.gated)


def strongest_bound(entry: AuditEntry | None) -> StrongestBound | None:
    """The gated bound with the largest ε̂ / claimed ε of a claiming defender; ``None`` without a claim or
    without a bound comparable with it.

    >>> strongest_bound(None) is None
    True
    """
    if entry is None or entry.claim is None:
        return None
    gated = _gated(entry)
    best: StrongestBound | None = None
    for f in check_bounds(entry.claim, audited_bounds(entry)):
        if not f.comparable or f.compared_with is None or (gated is not None and f.bound.kind not in gated):
            continue
        cand = StrongestBound(f.bound.kind, BOUND_LABELS.get(f.bound.kind, f.bound.kind), float(f.bound.epsilon),
                              float(f.compared_with.epsilon), f.violation)
        if best is None or cand.share > best.share:
            best = cand
    return best


def largest_gated_bound(entry: AuditEntry | None) -> tuple[float, str] | None:
    """A defender without a claim: its largest finite gated ε lower bound and the label of its audit (evidence of
    leakage, nothing to refute); ``None`` without one."""
    if entry is None:
        return None
    gated = _gated(entry)
    found = [(value, BOUND_LABELS.get(kind, kind)) for kind, _, _, value in entry.epsilon_lower_bounds()
             if (gated is None or kind in gated) and math.isfinite(value)]
    return max(found, key=lambda f: f[0]) if found else None


def _eps(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.3g}"


def strongest_line(entry: AuditEntry | None) -> str | None:
    """One line: the strongest ε̂ against the claim, e.g. ``strongest ε̂ 0.958 (white-box) ≤ claimed ε 0.997
    (96 % of the claim)``; ``None`` without a claim.

    >>> strongest_line(None) is None
    True
    """
    if entry is None or entry.claim is None:
        return None
    s = strongest_bound(entry)
    if s is None:
        return f"claimed ε {_eps(float(entry.claim.epsilon))}: no gated ε bound was comparable with it"
    relation = ">" if s.epsilon > s.claim_epsilon else "≤"
    share = "" if math.isinf(s.share) else f" ({s.share:.0%} of the claim)"
    return f"strongest ε̂ {_eps(s.epsilon)} ({s.label}) {relation} claimed ε {_eps(s.claim_epsilon)}{share}"


def whitebox_resolution(entry: AuditEntry) -> float | None:
    """The true ε above which the white-box audit refutes the claim, if the lower end of its interval keeps the
    same relative distance to the true ε as it has to the point estimate here: claimed ε · ε_point / ε̂.

    The white-box audit is model-based (:mod:`privaudit.stats.whitebox`): it estimates σ and q and accounts
    them, so its power is the width of its confidence interval, not a threshold test's (no 0.8-power figure,
    :mod:`privaudit.stats.detectable`). ``None`` without a claim, a finite ε̂ > 0 or a point estimate.
    """
    block = entry.whitebox
    if entry.claim is None or block is None:
        return None
    low = block.eps_lower_bound
    point = (block.model_extra or {}).get("eps_point")
    if low is None or point is None or not (0 < float(low) < math.inf) or not math.isfinite(float(point)):
        return None
    implied = entry.claim.implied_for(block.neighbourhood) if block.neighbourhood else entry.claim
    if implied is None:
        return None
    return float(implied.epsilon) * max(1.0, float(point) / float(low))


def could_have_seen(entry: AuditEntry | None) -> str:
    """How much the audit could have seen, per gated ε bound, the most sensitive first: the smallest true ε each
    bound detects with probability ≥ 0.8 at the size it ran (an ideal canary: a real one needs at least this);
    for the white-box audit its resolution (:func:`whitebox_resolution`).

    >>> could_have_seen(None)
    '—'
    """
    if entry is None or entry.claim is None:
        return "—"
    gated = _gated(entry)
    found: list[tuple[float, str, bool]] = []  # (ε, text, is a 0.8-power figure)
    others: list[str] = []
    if entry.whitebox is not None and (gated is None or "whitebox" in gated):
        res = whitebox_resolution(entry)
        if res is not None:
            low, pt = float(entry.whitebox.eps_lower_bound or 0.0), float((entry.whitebox.model_extra or {})["eps_point"])
            found.append((res, f"white-box: ε ≥ {res:.2f} (model-based: its certified ε̂ {low:.3g} lies "
                               f"{max(0.0, 1 - low / pt):.1%} below its estimate {pt:.3g})", False))
        else:
            others.append("white-box: no resolution (ε̂ or its point estimate is 0 or not finite)")
    for key, label in _DETECTABLE.items():
        if gated is not None and key not in gated:
            continue
        extra = getattr(getattr(entry, key, None), "model_extra", None) or {}
        if "detectable_epsilon" in extra:
            value = extra["detectable_epsilon"]
            v = math.inf if value is None else float(value)
            found.append((v, f"{label}: {'nothing below ε 50' if math.isinf(v) else f'ε ≥ {v:.2f}'}", True))
    for key, text in _NO_POWER.items():
        if getattr(entry, key, None) is not None and (gated is None or key in gated):
            others.append(text)
    if not found:
        return "not computed" + (f" ({'; '.join(others)})" if others else "")
    found.sort(key=lambda t: t[0])
    parts = "; ".join([text for _, text, _ in found] + others)
    eps, _, power = found[0]
    if math.isinf(eps):
        return "no bound could have caught any true ε below 50 at these sizes" + (f" ({parts})" if others else "")
    how = "with probability ≥ 0.8" if power else "by the white-box audit's interval"
    return f"a true ε ≥ {eps:.2f} is caught {how} ({parts})"


def defender_state(entry: AuditEntry | None, verdict: DefenderVerdict, not_audited: bool = False) -> DefenderState:
    """``not-audited``, ``fail``, ``pass`` (an audited claim holds) or ``pass-noclaim`` (no DP claim: PASS means
    only that the LTU privacy and utility floors hold; nothing is certified)."""
    if not_audited:
        return "not-audited"
    if not verdict.passed:
        return "fail"
    return "pass" if entry is not None and entry.claim is not None else "pass-noclaim"


def state_label(state: DefenderState) -> str:
    """The words shown for a state: ``PASS``, ``PASS (no DP claim)``, ``FAIL``, ``NOT AUDITED``."""
    return _STATE_LABELS[state]
