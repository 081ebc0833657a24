"""The theory check: the measured attack accuracy against the MI accuracy bounds a claim implies.

For every defender that claims an ε, the upper bounds on MI accuracy of Thudi et al. 2022
(Theorem 1, at ``bounds.p_member``), Yeom and Erlingsson (balanced game, p = 1/2; Erlingsson
with the claimed δ) and Sablayrolles (at ``bounds.p_member``) as compared in Thudi Table 1, and
Izzo et al. 2023's MIP η (Theorem 4; an η-MIP algorithm admits no attacker above 1/2 + η).
Thudi, Yeom and Sablayrolles hold for pure ε-DP; for an (ε, δ) claim they are computed at ε. The
empirical LTU accuracy of the strongest attacker sits beside them (``metrics/bounds.json``).

One check decides whether the accuracy beats a bound — evidence of an implementation or accounting
bug — and both ``metrics/bounds.json`` (``exceeds_theory``) and the release gate use it
(:func:`theory_check`): the accuracy minus z standard errors above any finite bound, z =
max(2, Φ⁻¹(1 − level/A)) over the A attackers (:func:`theory_z`), ``level`` the theory check's
share of ``gate.beta``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.claims.claim import PrivacyClaim
from privaudit.verdict.metrics_files import MI_ACCURACY_BOUNDS as KINDS
from privaudit.verdict.metrics_files import AttackerResult, BoundsEntry, LtuEntry, parse_entry
from privaudit.stats import mi_accuracy_bound, mip_eta

__all__ = ["CITATION", "compute_bounds", "defender_bounds", "theory_check", "theory_violations", "theory_z"]

#: the papers and equations of the bounds
CITATION = ("Thudi et al. 2022, 'Bounding Membership Inference' (Theorem 1; Yeom, Erlingsson, Sablayrolles as in "
            "Table 1); Izzo et al. 2023, 'Provable Membership Inference Privacy' (Theorem 4, η = 1/(1 + e^−ε) − 1/2)")


def theory_z(attackers: int, *, level: float) -> float:
    """Standard errors an attack accuracy must exceed a bound by before it is called a bug.

    The empirical accuracy is the maximum over ``attackers`` attackers, each roughly normal around
    its true accuracy, which the claim bounds; a one-sided test per attacker at ``level /
    attackers`` (Bonferroni over the attackers looked at) keeps the false "bug" probability at
    most ``level``. Never fewer than 2 standard errors.

    Args:
        attackers: A, the number of attackers whose maximum accuracy is compared (≥ 1).
        level: failure probability of the check (a false "bug"), ``level / A`` per attacker.

    >>> round(theory_z(5, level=0.01), 3), theory_z(1, level=0.5)
    (2.878, 2.0)
    """
    from scipy.stats import norm

    if not 0.0 < level < 1.0:
        raise ValueError(f"theory check level must be in (0, 1), got {level!r}")
    if attackers < 1:
        raise ValueError(f"attackers must be >= 1, got {attackers}")
    return max(2.0, float(norm.isf(level / attackers)))


def theory_violations(
    bounds: Mapping[str, float], accuracy: float, stderr: float | None = None, z: float = 2.0
) -> dict[str, float]:
    """The bounds that the empirical accuracy exceeds: ``{kind: bound}``.

    With ``stderr`` the exceedance must be beyond ``z`` standard errors
    (``accuracy - z stderr > bound``, see :func:`theory_z`); without it the point estimate is compared.
    """
    margin = z * stderr if stderr is not None and math.isfinite(stderr) and stderr > 0 else 0.0
    return {kind: b for kind, b in bounds.items() if accuracy - margin > b}


def theory_check(entry: BoundsEntry, ltu: LtuEntry | None, *, level: float,
                 use_error_bars: bool = True) -> tuple[dict[str, float], float, float | None]:
    """The one theory check: ``({bound kind: bound exceeded}, z, stderr used)`` for one defender.

    ``entry`` is its ``metrics/bounds.json`` row, ``ltu`` its ``metrics/ltu.json`` entry (the number
    of attackers A and the rounds), ``level`` the theory check's share of ``gate.beta``; without
    ``use_error_bars`` the point estimate is compared. The pure-ε bounds get the claim's δ (for the LTU
    neighbourhood) on top. No accuracy or no finite bound: nothing exceeded.
    """
    z = theory_z(max(1, len(ltu.attackers) if ltu is not None else 0), level=level)
    accuracy, delta = entry.empirical_accuracy, float(entry.delta or 0.0)
    # Thudi, Yeom, Sablayrolles and Izzo hold for pure ε: under (ε, δ)-DP an attacker's accuracy can
    # exceed them by at most δ (P[A = 1 | member] ≤ e^ε P[A = 1 | non-member] + δ); Erlingsson has δ
    bounds = {k: b if k == "erlingsson" else min(1.0, b + delta) for k, b in entry.accuracy_bounds().items()}
    if accuracy is None or not bounds or entry.comparable is False:
        return {}, z, None
    stderr = entry.accuracy_error(ltu) if use_error_bars else None
    return theory_violations(bounds, accuracy, stderr, z), z, stderr


def defender_bounds(claim: PrivacyClaim | None, ltu: AttackerResult | None, p_member: float, *,
                    level: float, use_error_bars: bool = True, claimed_eta: float | None = None) -> dict[str, Any]:
    """One row of ``metrics/bounds.json``: bounds (None without a claimed ε) + empirical accuracy.

    The LTU game swaps a member for a non-member (a ``replace_one`` neighbourhood), so the bounds
    use the claim implied for ``replace_one`` (:mod:`privaudit.claims.claim`): an add/remove (ε, δ) claim
    (DP-SGD) gives (2ε, (1 + e^ε)δ). A claim that implies nothing for it (label-DP) gives null
    bounds and ``comparable: false`` (the gate skips the theory check). ``exceeds_theory`` is
    :func:`theory_check` at ``level``. ``claimed_eta``: the η an η-MIP recipe claims instead of an ε (``kind:
    mip``): its bound 1/2 + η (Izzo et al. 2023, Definition 1) is checked the same way (issue 34: it was
    never checked).
    """
    empirical = None if ltu is None else ltu.accuracy
    row: dict[str, Any] = {k: None for k in KINDS}
    row.update(mip_eta=None, empirical_accuracy=empirical, p_member=p_member, exceeds_theory=False)
    if claim is None and claimed_eta is not None:
        row.update(mip_eta=float(claimed_eta), comparable=True)
        _check_row(row, ltu, empirical, level, use_error_bars)
        return row
    if claim is None:
        return row
    implied = claim.implied_for(Neighbourhood.REPLACE_ONE)
    row.update(neighbourhood=Neighbourhood.REPLACE_ONE, comparable=implied is not None)
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
    _check_row(row, ltu, empirical, level, use_error_bars)
    return row


def _check_row(row: dict[str, Any], ltu: AttackerResult | None, empirical: float | None, level: float,
               use_error_bars: bool) -> None:
    """Fill ``empirical_accuracy_stderr`` and ``exceeds_theory`` of a bounds row (:func:`theory_check`)."""
    if empirical is None:
        return
    # stderr of the accuracy = privacy_stderr / 2 (Eq. 1 of Pedersen et al. 2022)
    stderr = float(ltu.privacy_stderr or 0.0) if ltu is not None else 0.0
    row["empirical_accuracy_stderr"] = 0.5 * stderr
    exceeded, _, _ = theory_check(parse_entry(BoundsEntry, row, "bounds"),
                                  ltu if isinstance(ltu, LtuEntry) else None, level=level,
                                  use_error_bars=use_error_bars)
    row["exceeds_theory"] = bool(exceeded)


def compute_bounds(claims: Mapping[str, PrivacyClaim | None], ltu: Mapping[str, AttackerResult],
                   p_member: float, *, levels: Mapping[str, float], use_error_bars: bool = True,
                   mip_etas: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """``metrics/bounds.json``: {defender: row} for every defender in ``claims`` (name → its claim or None);
    ``levels[name]`` is the theory check's level for it (its budget share, or ``gate.beta`` when the
    check is not gated); ``mip_etas[name]``: the η an η-MIP defender claims (``info.json``'s ``mip_eta``)."""
    etas = mip_etas or {}
    return {name: defender_bounds(claim, ltu.get(name), p_member, level=levels[name], use_error_bars=use_error_bars,
                                  claimed_eta=etas.get(name))
            for name, claim in sorted(claims.items())}
