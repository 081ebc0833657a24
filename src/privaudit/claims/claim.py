"""What a DP claim says, and what it implies for the neighbourhood an audit tests.

A differential-privacy claim is a triple (ε, δ, neighbourhood). An audit certifies an ε lower
bound for *its own* neighbourhood and δ; comparing it with a claim made for another neighbourhood
or δ accuses honest recipes (an audit of a label flip against DP-SGD's add/remove ε) or misses
dishonest ones. :meth:`PrivacyClaim.implied_for` converts a claim to the neighbourhood of an audit
before the comparison.

Neighbourhoods (what differs between the two data sets of the DP definition):

* ``add_remove`` — one record is added or removed (DP-SGD with Poisson sampling as accounted by
  opacus; one-run and white-box canaries are inserted or not; LiDP ``add_remove``).
* ``replace_one`` — one record is replaced by another (data sets of equal size; LiDP
  ``replace_one``).
* ``replace_label`` — only the label of one record changes (label-DP: ALIBI/AGIBI; the Game 3
  label-flip canaries).

Group privacy (Dwork & Roth 2014, Theorem 2.2 for ε; the δ term of two steps composed along the
path D → D∖{x} → D∖{x}∪{x'}): a substitution is a removal followed by an addition, so an
(ε, δ) add/remove claim implies (2ε, (1 + e^ε)δ) for ``replace_one`` and hence for
``replace_label``. A label change is a special substitution, so a ``replace_one`` claim covers
``replace_label`` as it is. Nothing is implied the other way: a replace-one or label claim says
nothing about adding a record (``implied_for`` returns ``None``: the audit is not comparable).

A claim may carry the **mechanism** the recipe runs (:mod:`privaudit.claims.mechanisms`): its whole
trade-off curve, not only the (ε, δ) point. :meth:`PrivacyClaim.family` is the family of curves a
black-box bound tests the claim against (:mod:`privaudit.stats.tradeoff`): the mechanism's own, or
the (ε, δ) polygon when none is declared. The mechanism holds for the claim's own neighbourhood only:
a claim converted by group privacy keeps its (ε, δ) point and drops the curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privaudit.claims.neighbourhood import Neighbourhood

if TYPE_CHECKING:
    from privaudit.claims.mechanisms import DeclaredMechanism
    from privaudit.stats.tradeoff import TradeoffFamily

NEIGHBOURHOODS: tuple[str, ...] = tuple(n.value for n in Neighbourhood)

#: a group-privacy δ at or above 1 says nothing; it is capped just below 1 (the claim stays valid)
_DELTA_MAX = 1.0 - 1e-12

__all__ = ["NEIGHBOURHOODS", "Neighbourhood", "PrivacyClaim", "check_neighbourhood", "claim_family"]


def check_neighbourhood(value: str, where: str = "neighbourhood") -> Neighbourhood:
    """The :class:`Neighbourhood` ``value`` names, else ``ValueError`` naming ``where``."""
    if value not in NEIGHBOURHOODS:
        raise ValueError(f"{where} must be one of {list(NEIGHBOURHOODS)}, got {value!r}")
    return Neighbourhood(value)


@dataclass(frozen=True)
class PrivacyClaim:
    """An (ε, δ)-DP claim for one neighbourhood.

    >>> c = PrivacyClaim(1.0, 1e-5, "add_remove")
    >>> r = c.implied_for("replace_one")
    >>> round(r.epsilon, 3), round(r.delta / 1e-5, 4), r.neighbourhood.value
    (2.0, 3.7183, 'replace_one')
    >>> c.implied_for("add_remove") == c
    True
    >>> PrivacyClaim(1.0, 0.0, "replace_label").implied_for("add_remove") is None
    True
    """

    epsilon: float
    delta: float
    neighbourhood: Neighbourhood
    #: the declared mechanism (a :mod:`privaudit.claims.mechanisms` model) or ``None``: the point only
    mechanism: "DeclaredMechanism | None" = None

    def family(self) -> "TradeoffFamily":
        """The trade-off curves this claim is tested against: the declared mechanism's family, else the
        (ε, δ) polygon at the claim's δ (no assumption)."""
        if self.mechanism is not None:
            return self.mechanism.family()
        from privaudit.stats.tradeoff import EpsDeltaFamily

        return EpsDeltaFamily(float(self.epsilon), float(self.delta))

    def curve_name(self) -> str:
        """``metrics/audit.json``'s ``curve`` of a bound tested against this claim."""
        return "eps_delta" if self.mechanism is None else str(self.mechanism.kind)

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and self.epsilon >= 0 and not math.isnan(self.epsilon)):
            raise ValueError(f"claimed epsilon must be a number >= 0, got {self.epsilon!r}")
        if not (isinstance(self.delta, (int, float)) and 0.0 <= self.delta < 1.0):
            raise ValueError(f"claimed delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "neighbourhood", check_neighbourhood(self.neighbourhood, "claimed neighbourhood"))

    def implied_for(self, neighbourhood: Neighbourhood | str) -> "PrivacyClaim | None":
        """The guarantee this claim implies for ``neighbourhood``; ``None`` when it implies none."""
        target = check_neighbourhood(neighbourhood)
        if target == self.neighbourhood:
            return self
        if self.neighbourhood is Neighbourhood.ADD_REMOVE:  # two add/remove steps (group privacy, k = 2)
            eps = 2.0 * self.epsilon
            delta = min((1.0 + math.exp(min(self.epsilon, 700.0))) * self.delta, _DELTA_MAX)
            return PrivacyClaim(eps, delta, target)
        if self.neighbourhood is Neighbourhood.REPLACE_ONE and target is Neighbourhood.REPLACE_LABEL:  # a label change is a replacement
            return PrivacyClaim(self.epsilon, self.delta, target, self.mechanism)
        return None


def claim_family(claim: PrivacyClaim | None, delta: float) -> "TradeoffFamily":
    """The curves a black-box bound tests: ``claim``'s own family (:meth:`PrivacyClaim.family`); without a
    claim the (ε, δ) polygon at ``delta`` with no member claimed (θ_claim = ∞), whose ε̂ is the
    assumption-free bound.

    >>> claim_family(None, 1e-5).name, claim_family(PrivacyClaim(1.0, 0.0, "add_remove"), 1e-5).delta
    ('eps_delta', 0.0)
    """
    if claim is not None:
        return claim.family()
    from privaudit.stats.tradeoff import EpsDeltaFamily

    return EpsDeltaFamily(math.inf, delta)
