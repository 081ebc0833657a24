"""Empirical epsilon lower bounds from XBern confidence bounds (LiDP auditing).

Pillutla et al. 2023 ("Unleashing the Power of Randomization in Auditing Differentially Private
ML"), Algorithm 1 lines 7-8 (add/remove neighbourhood, eq. 4) and App. B.2 eq. (12)
(replace-one neighbourhood).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._checks import check_binary_matrix, check_prob
from .xbern import Method, xbern_interval

__all__ = [
    "epsilon_from_bounds",
    "lidp_epsilon_lower_bound",
    "lidp_epsilon_lower_bound_replace_one",
]


def epsilon_from_bounds(p1_lower: float, p0_upper: float, delta: float) -> float:
    """``max(0, log((p1_lower - delta) / p0_upper))`` — Algorithm 1 line 8 / eq. (2).

    The log is ``-inf`` when ``p1_lower <= delta`` (nothing can be certified), and the result is
    reported as ``max(0, .)``.

    Args:
        p1_lower: lower confidence bound on P(A(D1) in R), in [0, 1].
        p0_upper: upper confidence bound on P(A(D0) in R), in [0, 1].
        delta: the delta of the (epsilon, delta)-DP claim, in [0, 1].

    >>> round(epsilon_from_bounds(0.5, 0.1, 0.0), 4)
    1.6094
    >>> epsilon_from_bounds(1e-6, 0.1, 1e-5)
    0.0
    """
    p1_lower = check_prob("p1_lower", p1_lower)
    p0_upper = check_prob("p0_upper", p0_upper)
    delta = check_prob("delta", delta)
    num = p1_lower - delta
    if num <= 0.0:
        return 0.0
    if p0_upper <= 0.0:
        return math.inf
    return max(0.0, math.log(num / p0_upper))


def _check_pair(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    xa = check_binary_matrix("x", x)
    ya = check_binary_matrix("y", y)
    return xa, ya


def lidp_epsilon_lower_bound(
    x: ArrayLike,
    y: ArrayLike,
    delta: float,
    *,
    level: float,
    order: int = 2,
    method: Method = "wilson",
) -> float:
    """LiDP epsilon lower bound, add/remove neighbourhood (LiDP Algorithm 1, lines 7-8).

    ``p1_lower = XBernLower(x, level/2)``, ``p0_upper = XBernUpper(y, level/2)`` and
    ``eps_hat = log((p1_lower - delta) / p0_upper)``, reported as ``max(0, eps_hat)`` (0.0 when
    ``p1_lower <= delta``).  Guarantee: ``P(epsilon < eps_hat) <= level`` if the mechanism is
    (epsilon, delta)-DP (exactly for Bernstein, asymptotically for Wilson).

    Args:
        x: ``(n, K)`` 0/1 outcomes of the K canaries tested on the model trained WITH them
            (``A(D_1)``).
        y: ``(n', m)`` 0/1 outcomes of m fresh canaries tested on the model trained on ``D_0``
            (K-1 canaries), i.e. the null statistics of eq. (4).
        delta: delta of the claimed (epsilon, delta)-DP guarantee, in [0, 1].
        level: failure probability of the one-sided lower bound on epsilon, in (0, 1) (the
            paper's beta); each XBern side gets level/2.
        order: XBern interval order 1, 2 or 4 (see :func:`privaudit.stats.xbern_interval`).
        method: ``"wilson"`` or ``"bernstein"``.

    Returns:
        The certified lower bound on epsilon (>= 0.0).

    >>> import numpy as np
    >>> x = np.ones((200, 4)); x[:40] = 0       # canaries detected 80% of the time
    >>> y = np.zeros((200, 4)); y[:20] = 1      # fresh canaries "detected" 10% of the time
    >>> round(lidp_epsilon_lower_bound(x, y, delta=1e-5, level=0.05, order=1), 3)
    1.599
    """
    xa, ya = _check_pair(x, y)
    level = check_prob("level", level, open_low=True, open_high=True)
    delta = check_prob("delta", delta)
    p1_lower, _ = xbern_interval(xa, level=level / 2.0, order=order, method=method)
    _, p0_upper = xbern_interval(ya, level=level / 2.0, order=order, method=method)
    return epsilon_from_bounds(p1_lower, p0_upper, delta)


def lidp_epsilon_lower_bound_replace_one(
    x: ArrayLike,
    y: ArrayLike,
    delta: float,
    *,
    level: float,
    order: int = 2,
    method: Method = "wilson",
) -> float:
    """LiDP epsilon lower bound for the replace-one neighbourhood (LiDP App. B.2, eq. 12).

    Both sides of eq. (12) are measured on the SAME models ``A(D_1)`` (trained with K canaries):
    ``x`` tests the K included canaries, ``y`` tests m fresh canaries never used in training.  No
    model needs to be trained on K-1 canaries.  The bound is
    ``max(0, log((XBernLower(x, level/2) - delta) / XBernUpper(y, level/2)))`` and certifies
    epsilon of the *replace-one* guarantee (roughly twice the add/remove epsilon).

    Args:
        x: ``(n, K)`` 0/1 outcomes of included canaries on ``A(D_1)``.
        y: ``(n, m)`` 0/1 outcomes of fresh canaries on the same n models (same number of rows).
        delta, level, order, method: as in :func:`lidp_epsilon_lower_bound`.

    >>> import numpy as np
    >>> x = np.ones((200, 4)); x[:40] = 0
    >>> y = np.zeros((200, 4)); y[:20] = 1
    >>> round(lidp_epsilon_lower_bound_replace_one(x, y, delta=1e-5, level=0.05, order=1), 3)
    1.599
    """
    xa, ya = _check_pair(x, y)
    if xa.shape[0] != ya.shape[0]:
        raise ValueError(
            f"replace-one auditing measures x and y on the same models: x has {xa.shape[0]} rows "
            f"but y has {ya.shape[0]}"
        )
    return lidp_epsilon_lower_bound(xa, ya, delta, level=level, order=order, method=method)
