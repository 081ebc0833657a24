"""The one-run f-DP audit (Mahloujifar, Melis & Chaudhuri 2024, arXiv:2410.22235) against a claim's own curves.

:mod:`privaudit.stats.fdp_one_run` tests one curve (μ-GDP or the (ε, δ) polygon); here the same
recursion (:func:`~privaudit.stats.fdp_one_run.fdp_min_total_mass`) tests every member of a claim's
family (:mod:`privaudit.stats.tradeoff`) and reports the least private member it rejects.

numpy/scipy only; imports nothing from privaudit but other ``stats`` modules.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import check_counts, check_prob
from .fdp_one_run import fdp_min_total_mass
from .tradeoff import TradeoffFamily

__all__ = ["fdp_one_run_family_bound"]


def fdp_one_run_family_bound(correct: int, guesses: int, canaries: int, delta: float, family: TradeoffFamily,
                             *, level: float) -> tuple[float, float, bool]:
    """The one-run f-DP test of a claim's own family of curves: ``(theta*, eps_hat, refutes_claim)``.

    ``family`` is a :class:`privaudit.stats.tradeoff.TradeoffFamily` (symmetric curves, θ ordered from
    most to least private): for a symmetric f, ``fbar^{-1}(y) = f(1 - y)``, and the recursion of the
    module docstring rejects the members θ < θ*. ε̂ is the ε at ``delta`` of member θ*; as in
    :func:`privaudit.stats.tradeoff.refute_point` a count that does not reject the claim's own member never
    reports more than that member's ε.

    ``level``: failure probability of the one-sided bound (θ*, ε̂) returned, the size of each member's
    test, in (0, 1).

    >>> from privaudit.stats.tradeoff import EpsDeltaFamily
    >>> th, eps, rej = fdp_one_run_family_bound(100, 100, 100, 1e-5, EpsDeltaFamily(1.0, 1e-5), level=0.05)
    >>> round(eps, 2), rej  # the (eps, delta) curve bound, 3.49, refutes a claim of 1
    (3.49, True)
    """
    c, k, m = check_counts(correct, guesses, canaries)
    tau = check_prob("level", level, open_low=True, open_high=True)

    def rejects(theta: float) -> bool:
        inv = lambda y: float(family.curve(theta, np.array([1.0 - min(max(y, 0.0), 1.0)]))[0])  # noqa: E731
        return fdp_min_total_mass(c, k, m, inv, level=tau) > 1.0

    th_c = float(family.theta_claim)
    refutes = math.isfinite(th_c) and rejects(th_c)
    start = th_c if math.isfinite(th_c) and th_c > 0 else 1.0
    # the bracket from the claim's own θ (or 1): the same search as SubsampledGaussianFamily.theta_star, without
    # its ε cap (no PLD here) and continuing to bisect past theta_max
    if refutes if start == th_c else rejects(start):
        lo, hi = start, 2.0 * start
        while rejects(hi):
            lo, hi = hi, 2.0 * hi
            if hi > family.theta_max:
                break
    else:
        lo, hi = start / 2.0, start
        while lo > 1e-6 and not rejects(lo):
            lo, hi = lo / 2.0, lo
        if lo <= 1e-6:
            lo = hi = 0.0
    while hi > 0.0 and hi / max(lo, 1e-300) > 1.0 + 1e-4:
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2.0
        if rejects(mid):
            lo = mid
        else:
            hi = mid
    theta = max(lo, th_c) if refutes else (min(lo, th_c) if math.isfinite(th_c) else lo)
    eps = 0.0 if theta == 0.0 else family.epsilon(theta, delta)
    return theta, float(eps), bool(refutes)
