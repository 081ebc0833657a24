"""Theoretical bounds on membership-inference (MI) accuracy under epsilon-DP.

Thudi et al. 2022, "Bounding Membership Inference" (ICLR 2022 submission):

* Theorem 1: positive MI accuracy ``P(x* in D | S)`` of any attack on an epsilon-DP trainer lies in
  ``[ (1 + e^{eps} P0/P1)^{-1}, (1 + e^{-eps} P0/P1)^{-1} ]`` with ``P1 = P_{x*}(1)`` the
  probability of drawing x* into the training set and ``P0 = 1 - P1``;
* Corollary 1: negative accuracy lies in ``[ (1 + e^{eps} P1/P0)^{-1}, (1 + e^{-eps} P1/P0)^{-1} ]``;
* Table 1 / §2.3 / §5.1: Yeom ``e^eps / 2``, Erlingsson ``1 - e^{-eps}/2`` (advantage
  ``1 - e^{-eps} + delta e^{-eps}``, i.e. accuracy ``1 - e^{-eps}(1 - delta)/2``), Sablayrolles
  ``P1 + eps/4``;
* §4.2: dataset sub-sampling with rate T gives ``P1 <= T * P1`` (privacy amplification for MI);
* §6: deletion capacity ``m <= ln B / ln L`` with L the Corollary 1 negative-accuracy lower bound.

Paper misprints handled (issue 3):

* §5.1 prints 95% for the Erlingsson bound at eps = 2; the formula gives ``1 - e^{-2}/2 = 93.2%``.
  We implement (and test) the formula.
* §6 prints the negative-accuracy lower bound with ``e^{-eps}`` (that is the *upper* bound);
  Corollary 1's valid lower bound uses ``e^{+eps}``.  :func:`deletion_capacity` uses the valid one.

Thudi's bounds hold for pure epsilon-DP only (§5.2 shows positive accuracy is unbounded under
(eps, delta)-DP), so every kind except ``"erlingsson"`` rejects ``delta > 0``.  Bounds that can
exceed 1 (Yeom, Sablayrolles) are capped at 1.
"""

from __future__ import annotations

import math
from typing import Literal

from ._checks import check_nonneg, check_prob

__all__ = [
    "mi_accuracy_bound",
    "mi_accuracy_lower_bound",
    "mi_negative_accuracy_bounds",
    "mi_positive_advantage_bound",
    "subsampled_mi_accuracy_bound",
    "deletion_capacity",
]

BoundKind = Literal["thudi", "yeom", "erlingsson", "sablayrolles"]


def _ratio(p_member: float) -> float:
    return (1.0 - p_member) / p_member  # P0 / P1


def mi_accuracy_bound(
    epsilon: float, p_member: float = 0.5, kind: BoundKind = "thudi", delta: float = 0.0
) -> float:
    """Upper bound on MI (positive) accuracy for an epsilon-DP trainer (Thudi et al. Thm 1, Table 1).

    Args:
        epsilon: DP epsilon (>= 0, may be ``inf``).
        p_member: probability ``P_{x*}(1)`` that the target was drawn into the training set,
            in (0, 1].  Yeom and Erlingsson are defined for the balanced game only (0.5).
        kind: ``"thudi"`` ``(1 + e^{-eps} P0/P1)^{-1}`` (Theorem 1); ``"yeom"`` ``e^eps/2``;
            ``"erlingsson"`` ``1 - e^{-eps}(1 - delta)/2``; ``"sablayrolles"`` ``P1 + eps/4``.
        delta: DP delta; only the Erlingsson bound accounts for it, the others need ``delta == 0``.

    Returns:
        The bound, capped at 1.

    >>> round(mi_accuracy_bound(1.0), 3), round(mi_accuracy_bound(1.0, kind="erlingsson"), 3)
    (0.731, 0.816)
    >>> mi_accuracy_bound(1.0, kind="sablayrolles"), mi_accuracy_bound(2.0, kind="sablayrolles")
    (0.75, 1.0)
    """
    eps = check_nonneg("epsilon", epsilon, allow_inf=True)
    p1 = check_prob("p_member", p_member, open_low=True)
    delta = check_prob("delta", delta)
    if kind not in ("thudi", "yeom", "erlingsson", "sablayrolles"):
        raise ValueError(f"kind must be 'thudi', 'yeom', 'erlingsson' or 'sablayrolles', got {kind!r}")
    if delta > 0.0 and kind != "erlingsson":
        raise ValueError(
            f"delta={delta!r}: the {kind!r} bound holds for pure epsilon-DP only (Thudi et al. §5.2 "
            "show MI positive accuracy is unbounded under (eps, delta)-DP); use kind='erlingsson'"
        )
    if kind in ("yeom", "erlingsson") and p1 != 0.5:
        raise ValueError(f"the {kind!r} bound is for the balanced game p_member=0.5, got p_member={p_member!r}")
    if math.isinf(eps):
        return 1.0
    if kind == "thudi":
        return 1.0 / (1.0 + math.exp(-eps) * _ratio(p1))
    if kind == "yeom":
        return min(1.0, math.exp(eps) / 2.0)
    if kind == "erlingsson":
        return min(1.0, 1.0 - math.exp(-eps) * (1.0 - delta) / 2.0)
    return min(1.0, p1 + eps / 4.0)


def mi_accuracy_lower_bound(epsilon: float, p_member: float = 0.5) -> float:
    """Lower bound on MI positive accuracy (Thudi et al. Theorem 1, lower side).

    ``(1 + e^{eps} P0/P1)^{-1}``: no attack on an epsilon-DP trainer can push the posterior
    ``P(x* in D | S)`` below this.

    >>> round(mi_accuracy_lower_bound(1.0), 4)
    0.2689
    """
    eps = check_nonneg("epsilon", epsilon, allow_inf=True)
    p1 = check_prob("p_member", p_member, open_low=True)
    if math.isinf(eps):
        return 0.0 if p1 < 1.0 else 1.0
    return 1.0 / (1.0 + math.exp(eps) * _ratio(p1))


def mi_negative_accuracy_bounds(epsilon: float, p_member: float = 0.5) -> tuple[float, float]:
    """``(lower, upper)`` bounds on MI negative accuracy ``P(x* not in D | S)`` (Thudi Corollary 1).

    ``lower = (1 + e^{+eps} P1/P0)^{-1}`` and ``upper = (1 + e^{-eps} P1/P0)^{-1}``.

    Args:
        epsilon: DP epsilon (>= 0).
        p_member: ``P_{x*}(1)`` in [0, 1).

    >>> lo, up = mi_negative_accuracy_bounds(1.0, 0.5)
    >>> round(lo, 4), round(up, 4)
    (0.2689, 0.7311)
    """
    eps = check_nonneg("epsilon", epsilon)
    p1 = check_prob("p_member", p_member, open_high=True)
    r = p1 / (1.0 - p1)
    return 1.0 / (1.0 + math.exp(eps) * r), 1.0 / (1.0 + math.exp(-eps) * r)


def mi_positive_advantage_bound(epsilon: float, p_member: float = 0.5) -> float:
    """Upper bound on positive MI advantage ``2 (A - P1)`` (Thudi et al. eq. 5).

    >>> round(mi_positive_advantage_bound(1.0), 4)
    0.4621
    """
    p1 = check_prob("p_member", p_member, open_low=True)
    return 2.0 * (mi_accuracy_bound(epsilon, p1) - p1)


def subsampled_mi_accuracy_bound(epsilon: float, sample_rate: float, p_member: float = 1.0) -> float:
    """Theorem 1 bound after dataset sub-sampling with rate T (Thudi et al. §4.1-4.2).

    If the training set is drawn from the available data by keeping each point with probability
    ``T = sample_rate``, then ``P_{x*}(1) <= T * p_member`` and, the bound being increasing in
    ``P_{x*}(1)``, the positive accuracy is at most ``(1 + e^{-eps} (1 - T p)/(T p))^{-1}``.
    §4.1: eps = 2, ``P_{x*}(1) = 0.01`` gives 6.9%.

    Args:
        epsilon: DP epsilon of the trainer (>= 0).
        sample_rate: sub-sampling probability T in (0, 1].
        p_member: probability that x* is in the data before sub-sampling (default 1).

    >>> round(subsampled_mi_accuracy_bound(2.0, 0.01), 4)
    0.0695
    """
    t = check_prob("sample_rate", sample_rate, open_low=True)
    p = check_prob("p_member", p_member, open_low=True)
    return mi_accuracy_bound(epsilon, t * p, kind="thudi")


def deletion_capacity(epsilon: float, p_member: float, b: float) -> int:
    """Number of deletion requests that need no unlearning (Thudi et al. §6).

    With ``L`` the valid Corollary 1 lower bound on negative accuracy,
    ``L = (1 + e^{+eps} P1/P0)^{-1}`` (§6 misprints it with ``e^{-eps}``), a set of m independent
    requests keeps ``P(x* not in D | S) >= L^m >= B`` as long as ``m <= ln B / ln L``; the capacity
    is ``floor(ln B / ln L)``.

    Args:
        epsilon: DP epsilon of the trainer (>= 0, finite).
        p_member: probability ``P_x(1)`` of drawing each point (e.g. c/N), in (0, 1).
        b: required B-MI unlearning level B in (0, 1].

    >>> deletion_capacity(1.0, 100 / 10000, 0.8)
    8
    """
    eps = check_nonneg("epsilon", epsilon)
    p1 = check_prob("p_member", p_member, open_low=True, open_high=True)
    b = check_prob("b", b, open_low=True)
    lower, _ = mi_negative_accuracy_bounds(eps, p1)
    if lower <= 0.0:
        return 0
    return int(math.floor(math.log(b) / math.log(lower) + 1e-12))
