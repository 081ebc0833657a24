"""LTU (Leave-Two-Unlabeled) privacy and utility scores and naive-attacker accuracy bounds.

Pedersen et al. 2022, "LTU Attacker for Membership Inference" (PPAI-22):

* Eq. (1): ``Privacy = min{2(1 - A_ltu), 1} +/- 2 sqrt(A_ltu (1 - A_ltu) / N)``;
* Eq. (2): ``Utility = max{(c A_D - 1)/(c - 1), 0} +/- c sqrt(A_D (1 - A_D) / |D_R|)``;
* Theorem 1 (eq. 3-5): any discriminant f gives ``A_ltu >= 1/2 + (p_R - p_D)/2`` with
  ``p_R = P[f(r) > f(d)]``, ``p_D = P[f(r) < f(d)]`` over r ~ Reserved, d ~ Defender (ties broken
  by a fair coin);
* Theorem 2 (eq. 6, App. A): a loss bounded in [0, 1] gives ``A_ltu >= 1/2 + (e_R - e_D)/2``.

Bounds are floored at 1/2 (random guessing), which is a valid lower bound for any LTU attacker.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._checks import check_int, check_prob

__all__ = [
    "ltu_privacy",
    "ltu_utility",
    "ltu_pairwise_probabilities",
    "ltu_pairwise_accuracy",
    "ltu_theorem1_bound",
    "ltu_theorem2_bound",
]


def ltu_privacy(accuracy: float, rounds: int) -> tuple[float, float]:
    """Global LTU privacy score and its standard error (Pedersen et al. Eq. 1).

    Args:
        accuracy: LTU attacker membership accuracy ``A_ltu`` over N rounds, in [0, 1].
        rounds: number N of LTU rounds (>= 1).

    Returns:
        ``(min(2 (1 - A), 1), 2 sqrt(A (1 - A) / N))``.

    >>> ltu_privacy(0.75, 100)
    (0.5, 0.08660254037844387)
    >>> ltu_privacy(0.3, 100)[0]
    1.0
    """
    a = check_prob("accuracy", accuracy)
    n = check_int("rounds", rounds, minimum=1)
    return min(2.0 * (1.0 - a), 1.0), 2.0 * math.sqrt(a * (1.0 - a) / n)


def ltu_utility(accuracy: float, n_classes: int, n_reserved: int, *,
                error: Literal["delta", "paper"] = "delta") -> tuple[float, float]:
    """Defender utility score and its standard error (Pedersen et al. Eq. 2).

    The score is ``U = max((c A − 1)/(c − 1), 0)``. Its standard error: A is a mean of |D_R| Bernoulli
    outcomes, so ``se(A) = sqrt(A (1 − A)/|D_R|)`` and, U being linear in A,
    ``se(U) = c/(c − 1) · se(A)`` (``error="delta"``, the default: what the gate and the report use).
    The paper prints ``c · se(A)`` (``error="paper"``), (c − 1) times too large (9× for 10 classes);
    it is kept only to reproduce the paper's Table 1 (``benchmarks/ltu_table1.py``).

    Args:
        accuracy: classification accuracy ``A_D`` of the Defender model on the Reserved data.
        n_classes: number of classes c (>= 2).
        n_reserved: size ``|D_R|`` of the Reserved set (>= 1).
        error: ``"delta"`` (correct) or ``"paper"`` (Eq. 2 as printed).

    >>> s, e = ltu_utility(0.91, 10, 1000)
    >>> round(s, 4), round(e, 4)
    (0.9, 0.0101)
    >>> round(ltu_utility(0.91, 10, 1000, error="paper")[1], 4)
    0.0905
    """
    a = check_prob("accuracy", accuracy)
    c = check_int("n_classes", n_classes, minimum=2)
    n = check_int("n_reserved", n_reserved, minimum=1)
    if error not in ("delta", "paper"):
        raise ValueError(f"error must be 'delta' or 'paper', got {error!r}")
    se_a = math.sqrt(a * (1.0 - a) / n)
    return max((c * a - 1.0) / (c - 1.0), 0.0), (c / (c - 1.0) if error == "delta" else float(c)) * se_a


def _as_1d(name: str, v: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(v, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def ltu_pairwise_probabilities(f_reserved: ArrayLike, f_defender: ArrayLike) -> tuple[float, float]:
    """``(p_R, p_D)`` of Pedersen et al. eq. (3)-(4) over all (reserved, defender) pairs.

    ``p_R = P[f(r) > f(d)]`` and ``p_D = P[f(r) < f(d)]`` with r uniform over ``f_reserved`` and d
    uniform over ``f_defender`` (exact, O((n_R + n_D) log n_D) by sorting).

    Args:
        f_reserved: ``(n_R,)`` values of the discriminant (e.g. per-sample loss) on Reserved data.
        f_defender: ``(n_D,)`` values on Defender (training) data.

    >>> ltu_pairwise_probabilities([0.4, 0.7, 0.9], [0.1, 0.3, 0.6])
    (0.8888888888888888, 0.1111111111111111)
    """
    r = _as_1d("f_reserved", f_reserved)
    d = np.sort(_as_1d("f_defender", f_defender))
    below = np.searchsorted(d, r, side="left")  # defender values < r
    above = d.size - np.searchsorted(d, r, side="right")  # defender values > r
    total = r.size * d.size
    return float(below.sum() / total), float(above.sum() / total)


def ltu_pairwise_accuracy(f_reserved: ArrayLike, f_defender: ArrayLike) -> float:
    """Accuracy of the pairwise LTU attacker predicting "Reserved" for the larger f (App. C).

    Equals ``p_R + (1 - p_R - p_D)/2 = 1/2 + (p_R - p_D)/2`` (eq. 5), ties counted as 1/2.
    App. C example: ``f(d) = (0.1, 0.3, c)``, ``f(r) = (0.4, 0.7, 0.9)`` gives 8/9, 7/9, 6/9 for
    c = 0.6, 0.8, 0.95.

    >>> round(ltu_pairwise_accuracy([0.4, 0.7, 0.9], [0.1, 0.3, 0.8]) * 9, 6)
    7.0
    """
    p_r, p_d = ltu_pairwise_probabilities(f_reserved, f_defender)
    return 0.5 + 0.5 * (p_r - p_d)


def ltu_theorem1_bound(f_reserved: ArrayLike, f_defender: ArrayLike) -> float:
    """Lower bound on LTU attacker accuracy from a discriminant f (Pedersen et al. Theorem 1).

    ``A_ltu >= 1/2 + (p_R - p_D)/2`` from per-sample values (e.g. losses) of Reserved and Defender
    samples; floored at 1/2 (a coin flip achieves 1/2, and the theorem needs ``p_R > p_D``).

    Args:
        f_reserved: ``(n_R,)`` per-sample values on Reserved data.
        f_defender: ``(n_D,)`` per-sample values on Defender data.

    >>> r = [0.0] * 4 + [0.5] * 4 + [1.0] * 2   # Table 3 (App. B) marginal of l(r)
    >>> d = [0.0] * 6 + [0.5] * 3 + [1.0] * 1   # Table 3 marginal of l(d)
    >>> round(ltu_theorem1_bound(r, d), 6)
    0.61
    """
    return max(0.5, ltu_pairwise_accuracy(f_reserved, f_defender))


def ltu_theorem2_bound(loss_reserved: ArrayLike, loss_defender: ArrayLike) -> float:
    """Lower bound on LTU attacker accuracy from a bounded loss (Pedersen et al. Theorem 2, App. A).

    ``A_ltu >= 1/2 + (e_R - e_D)/2`` with ``e_R``, ``e_D`` the mean losses on Reserved / Defender
    data; losses must lie in [0, 1] (rescale first).  Floored at 1/2.

    Args:
        loss_reserved: ``(n_R,)`` per-sample losses in [0, 1] on Reserved data.
        loss_defender: ``(n_D,)`` per-sample losses in [0, 1] on Defender data.

    >>> r = [0.0] * 4 + [0.5] * 4 + [1.0] * 2
    >>> d = [0.0] * 6 + [0.5] * 3 + [1.0] * 1
    >>> round(ltu_theorem2_bound(r, d), 6)
    0.575
    """
    r = _as_1d("loss_reserved", loss_reserved)
    d = _as_1d("loss_defender", loss_defender)
    for name, arr in (("loss_reserved", r), ("loss_defender", d)):
        if arr.min() < 0.0 or arr.max() > 1.0:
            raise ValueError(
                f"{name} must lie in [0, 1] (Theorem 2 needs a bounded loss; rescale it), "
                f"got range [{arr.min()}, {arr.max()}]"
            )
    return max(0.5, 0.5 + 0.5 * (float(r.mean()) - float(d.mean())))
