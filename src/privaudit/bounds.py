"""Theoretical membership-inference bounds next to the measured attack accuracy.

For every defender that claims an ε, the upper bounds on MI accuracy of Thudi et al. 2022
(Theorem 1, at ``bounds.p_member``), Yeom and Erlingsson (balanced game, p = 1/2; Erlingsson
with the claimed δ) and Sablayrolles (at ``bounds.p_member``) as compared in Thudi Table 1, and
Izzo et al. 2023's MIP η (Theorem 4). Thudi, Yeom and Sablayrolles hold for pure ε-DP; for an
(ε, δ) claim they are computed at ε and the violation check adds δ to the Thudi bound, since
(ε, δ)-DP gives P[A = 1 | member] ≤ e^ε P[A = 1 | non-member] + δ. The empirical LTU accuracy of the
strongest attacker sits beside them; ``exceeds_theory`` flags an empirical accuracy above the
tightest bound *beyond its error bar* — evidence of an implementation or accounting bug.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privaudit.claims import PrivacyClaim
from privaudit.metrics_files import MI_ACCURACY_BOUNDS as KINDS
from privaudit.metrics_files import AttackerResult
from privaudit.stats import mi_accuracy_bound, mip_eta


def defender_bounds(claim: PrivacyClaim | None, ltu: AttackerResult | None, p_member: float) -> dict[str, Any]:
    """One row of ``metrics/bounds.json``: bounds (None without a claimed ε) + empirical accuracy.

    The LTU game swaps a member for a non-member (a ``replace_one`` neighbourhood), so the bounds
    use the claim implied for ``replace_one`` (:mod:`privaudit.claims`): an add/remove (ε, δ) claim
    (DP-SGD) gives (2ε, (1 + e^ε)δ). A claim that implies nothing for it (label-DP) gives null
    bounds and ``comparable: false`` (the gate skips the theory check).
    """
    empirical = None if ltu is None else ltu.accuracy
    row: dict[str, Any] = {k: None for k in KINDS}
    row.update(mip_eta=None, empirical_accuracy=empirical, p_member=p_member, exceeds_theory=False)
    if claim is None:
        return row
    implied = claim.implied_for("replace_one")
    row.update(neighbourhood="replace_one", comparable=implied is not None)
    if implied is None:
        return row
    claimed_epsilon, delta = implied.epsilon, implied.delta
    row["compared_epsilon"] = claimed_epsilon
    row["thudi"] = mi_accuracy_bound(claimed_epsilon, p_member=p_member, kind="thudi")
    row["yeom"] = mi_accuracy_bound(claimed_epsilon, p_member=0.5, kind="yeom")
    row["erlingsson"] = mi_accuracy_bound(claimed_epsilon, p_member=0.5, kind="erlingsson", delta=delta)
    row["sablayrolles"] = mi_accuracy_bound(claimed_epsilon, p_member=p_member, kind="sablayrolles")
    row["delta"] = delta
    row["mip_eta"] = mip_eta(claimed_epsilon)
    if empirical is not None:
        # LTU accuracy is measured on balanced pairs: compare with the p = 1/2 Thudi bound (+ δ),
        # allowing two standard errors (stderr of accuracy = privacy_stderr / 2, Eq. 1).
        bound = min(1.0, mi_accuracy_bound(claimed_epsilon, p_member=0.5, kind="thudi") + delta)
        stderr = float(ltu.privacy_stderr or 0.0) if ltu is not None else 0.0
        row["empirical_accuracy_stderr"] = 0.5 * stderr
        row["exceeds_theory"] = bool(empirical - 2 * 0.5 * stderr > bound)
    return row


def compute_bounds(claims: Mapping[str, PrivacyClaim | None], ltu: Mapping[str, AttackerResult],
                   p_member: float) -> dict[str, Any]:
    """``metrics/bounds.json``: {defender: row} for every defender in ``claims`` (name → its claim or None)."""
    return {name: defender_bounds(claim, ltu.get(name), p_member) for name, claim in sorted(claims.items())}
