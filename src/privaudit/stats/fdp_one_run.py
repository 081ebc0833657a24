"""f-DP analysis of the one-run experiment (Mahloujifar, Melis & Chaudhuri 2024/2025).

"Auditing f-Differential Privacy in One Run" (arXiv:2410.22235; ICML 2025, PMLR 267:42615-42641)
analyses the same experiment as Steinke, Nasr & Jagielski (2023): m canaries, each included
independently with probability 1/2, one training run, an auditor that makes exactly ``k'`` guesses
("in"/"out") and abstains on the rest, ``c`` of them correct.  Instead of the (eps, delta) bound of
Steinke et al. it tests the hypothesis "the mechanism is f-DP" for a whole trade-off curve f, here
the Gaussian curve ``G_mu`` (mu-GDP) or the (eps, delta) curve ``f_{eps,delta}``.

What was and was not verified (read before relying on the numbers)
--------------------------------------------------------------------
* The paper's text (theorem/algorithm/equation numbers) could not be read from this workplace
  (only its abstract).  The procedure implemented here is the paper's ``audit_rh_with_cap``
  recursion as published in two independent implementations — Meta's PrivacyGuard
  (``privacy_guard/analysis/mia/fdp_analysis_node.py``, the authors' employer) and Google
  DeepMind's ``jax_privacy/auditing.py`` (``_epsilon_one_run_fdp``) — which agree with each other.
  Equation numbers of arXiv:2410.22235 are therefore NOT cited.
* Its validity was re-derived here from the definition of f-DP (proof below) and checked
  numerically: the recursion's value equals the exact minimum of the convex program of the proof
  (SLSQP, 40 random small instances, gap <= 1e-12), and simulations of an exactly-mu-GDP mechanism
  never reject the true mu more often than ``level`` (``tests/one_run/test_fdp_one_run.py``,
  ``benchmarks/bench_one_run.py``).

The bound (proof sketch, per canary j, for any test/guessing rule)
------------------------------------------------------------------
Let ``fbar(x) = 1 - f(x)`` (concave, increasing).  f-DP of the per-canary neighbouring pair says
``P_in(A) <= fbar(P_out(A))`` and ``P_out(A) <= fbar(P_in(A))`` for every output event A.  Let C be
the number of correct guesses, I = k' - C the incorrect ones, and

    R_i = E[C 1{C >= i}] / m,        H_i = E[I 1{C >= i}] / m.

Fix j and the other canaries' bits.  The output event "guess j = in and at least i of the other
guesses are correct" is, with j included, "j correct and C >= i+1" and, with j excluded, "j wrong
and C >= i"; the same holds for "guess j = out" with the roles swapped.  f-DP on both events,
concavity of fbar and averaging over j (Jensen) give

    (1)  R_{i+1} <= fbar(H_i),   i.e.   H_i >= fbar^{-1}(R_{i+1}),     and trivially H_i >= H_{i+1};
    (2)  R_i - R_{i+1} = i P[C = i] / m = i / (k' - i) * (H_i - H_{i+1})   (exactly k' guesses);
    (3)  R_0 + H_0 = k' / m.

If P[C >= c] >= tau, the least total mass compatible with (1)-(2) is obtained by putting mass tau
at C = c (``r_c = tau c / m``, ``h_c = tau (k' - c) / m``) and then, for i = c-1, ..., 0, the
smallest mass allowed by (1):

    h_i = max(h_{i+1}, fbar^{-1}(r_{i+1})),    r_i = r_{i+1} + i / (k' - i) * (h_i - h_{i+1}).

If ``r_0 + h_0 > k'/m`` this contradicts (3), so under the f-DP hypothesis P[C >= c] < tau:
rejecting when ``r_0 + h_0 > k'/m`` is a level-tau test.  The rejection region is monotone in the
curve (a more private curve has a larger fbar^{-1}), so "largest mu rejected" is a (1 - tau)
lower bound on the true mu, and likewise for eps of the (eps, delta) curve.

Curves:

* mu-GDP (Dong, Roth & Su 2022, "Gaussian Differential Privacy", JRSS-B, arXiv:1905.02383):
  ``G_mu(x) = Phi(Phi^{-1}(1 - x) - mu)`` so ``fbar(x) = Phi(Phi^{-1}(x) + mu)`` and
  ``fbar^{-1}(y) = Phi(Phi^{-1}(y) - mu)``.  Conversion to (eps, delta) by their Corollary 2.13:
  mu-GDP is (eps, delta(eps))-DP for all eps >= 0 with
  ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, and this is tight.
* (eps, delta)-DP: ``fbar(x) = min(1, e^eps x + delta, 1 - e^-eps (1 - delta - x))``.

Meaning of the GDP result: ``mu_lower_bound`` is a valid (1 - tau) lower bound on the smallest mu
for which the mechanism is mu-GDP.  ``gdp_epsilon(mu_lower_bound, delta)`` is the eps at delta of
that Gaussian curve; it lower-bounds the mechanism's eps at delta only if its trade-off curve is
Gaussian-shaped (approximately so for DP-SGD by the CLT of Dong et al.).  The (eps, delta)-curve
result needs no such assumption.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import optimize, special

from ._checks import check_counts, check_prob

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_blowup_inverse",
    "eps_delta_blowup_inverse",
    "fdp_min_total_mass",
    "fdp_one_run_rejects",
    "fdp_one_run_mu_lower_bound",
    "fdp_one_run_epsilon_lower_bound",
]

_MU_MAX = 50.0
_EPS_MAX = 60.0


# --------------------------------------------------------------------------------- GDP <-> (eps, delta)
def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2022, Corollary 2.13), computed in the log domain.

    >>> round(gdp_delta(0.0, 1.0), 6)  # 2 Phi(mu/2) - 1
    0.382925
    """
    eps, mu = float(epsilon), float(mu)
    if mu < 0 or eps < 0:
        raise ValueError(f"need mu >= 0 and epsilon >= 0, got mu={mu!r}, epsilon={eps!r}")
    if mu == 0.0:
        return 0.0
    a = special.log_ndtr(-eps / mu + mu / 2)
    b = eps + special.log_ndtr(-eps / mu - mu / 2)
    if b >= a:  # rounding only: the difference is >= 0 mathematically
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with mu-GDP => (eps, delta)-DP (inverse of :func:`gdp_delta` in eps).

    >>> round(gdp_epsilon(1.0, 1e-5), 3)
    4.377
    """
    mu = float(mu)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    if not (mu >= 0.0) or not math.isfinite(mu):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    if mu == 0.0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-10))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu with ``gdp_epsilon(mu, delta) == epsilon`` (the Gaussian curve through (eps, delta)).

    >>> round(gdp_mu(gdp_epsilon(0.7, 1e-5), 1e-5), 6)
    0.7
    >>> round(gdp_mu(1.0, 1e-5), 4)  # the Gaussian curve through (1, 1e-5)
    0.2681
    """
    eps = float(epsilon)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    if not (eps > 0.0) or not math.isfinite(eps):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    hi = 1.0
    while gdp_delta(eps, hi) < delta:
        hi *= 2.0
    return float(optimize.brentq(lambda m: gdp_delta(eps, m) - delta, 0.0, hi, xtol=1e-12))


# --------------------------------------------------------------------------------------- blow-ups
def gdp_blowup_inverse(mu: float) -> Callable[[float], float]:
    """``fbar^{-1}(y) = Phi(Phi^{-1}(y) - mu)`` for the Gaussian trade-off curve G_mu.

    >>> round(gdp_blowup_inverse(1.0)(0.5), 6)  # Phi(-1)
    0.158655
    """
    mu = float(mu)

    def inv(y: float) -> float:
        if y <= 0.0:
            return 0.0
        if y >= 1.0:
            return 1.0
        return float(special.ndtr(special.ndtri(y) - mu))

    return inv


def eps_delta_blowup_inverse(epsilon: float, delta: float) -> Callable[[float], float]:
    """``fbar^{-1}(y) = max(0, (y - delta) e^-eps, 1 - delta - e^eps (1 - y))`` for (eps, delta)-DP.

    >>> round(eps_delta_blowup_inverse(1.0, 0.0)(0.5), 6)  # 0.5 / e
    0.18394
    """
    e = math.exp(min(float(epsilon), 700.0))
    d = float(delta)

    def inv(y: float) -> float:
        y = min(max(y, 0.0), 1.0)
        return max(0.0, (y - d) / e, 1.0 - d - e * (1.0 - y))

    return inv


# ------------------------------------------------------------------------------------ the recursion
def _check(correct: int, guesses: int, canaries: int, level: float) -> tuple[int, int, int, float]:
    c, k, m = check_counts(correct, guesses, canaries)
    tau = check_prob("level", level, open_low=True, open_high=True)
    return c, k, m, tau


def fdp_min_total_mass(correct: int, guesses: int, canaries: int, blowup_inverse: Callable[[float], float], *,
                       level: float) -> float:
    """``(m / k') (r_0 + h_0)``: least total probability compatible with P[C >= c] >= level.

    The greedy recursion of the module docstring (``audit_rh_with_cap`` of the reference
    implementations); a value > 1 means the f-DP hypothesis is rejected at ``level``.

    Args:
        correct, guesses, canaries: the one-run counts c <= k' <= m.
        blowup_inverse: ``fbar^{-1}`` of the tested curve (:func:`gdp_blowup_inverse`, ...).
        level: size of the test (the probability tau of the module docstring), in (0, 1).

    >>> round(fdp_min_total_mass(95, 100, 1000, gdp_blowup_inverse(0.5), level=0.05), 2)  # > 1: reject
    101.61
    >>> fdp_min_total_mass(95, 100, 1000, gdp_blowup_inverse(2.0), level=0.05)  # mu = 2 is not rejected
    0.05
    """
    c, k, m, tau = _check(correct, guesses, canaries, level)
    if k == 0 or c == 0:
        return tau  # nothing to contradict
    r = tau * c / m
    h = tau * (k - c) / m
    for i in range(c - 1, -1, -1):
        h_new = max(h, blowup_inverse(r))
        if h_new == h:  # fixed point: neither h nor r changes any more
            break
        r = r + i / (k - i) * (h_new - h)
        h = h_new
    return (r + h) * m / k


def fdp_one_run_rejects(correct: int, guesses: int, canaries: int, blowup_inverse: Callable[[float], float], *,
                        level: float) -> bool:
    """True iff c correct of k' guesses rejects the f-DP hypothesis at ``level`` (see module doc).

    ``level``: the test's size, the probability of rejecting a hypothesis that holds, in (0, 1).

    >>> fdp_one_run_rejects(95, 100, 1000, gdp_blowup_inverse(0.5), level=0.05)
    True
    """
    return fdp_min_total_mass(correct, guesses, canaries, blowup_inverse, level=level) > 1.0


def _min_total_mass_many(c: int, k: int, m: int, tau: float,
                         inverse: Callable[[np.ndarray], np.ndarray], size: int) -> np.ndarray:
    """:func:`fdp_min_total_mass` for ``size`` curves at once (``inverse`` maps (size,) -> (size,))."""
    if k == 0 or c == 0:
        return np.full(size, tau)
    r = np.full(size, tau * c / m)
    h = np.full(size, tau * (k - c) / m)
    for i in range(c - 1, -1, -1):
        h_new = np.maximum(h, inverse(r))
        r = r + i / (k - i) * (h_new - h)
        h = h_new
    return (r + h) * m / k


def _sup_rejected(rejects: Callable[[np.ndarray], np.ndarray], upper: float, tol: float) -> float:
    """sup{t >= 0 : rejects(t') for all t' <= t} for a rejection set that is an interval [0, t*).

    ``rejects`` is vectorised; the bracket is refined on grids of 64 points, keeping only the
    prefix of rejected points (conservative if rounding ever broke monotonicity).
    """
    if not bool(rejects(np.array([0.0]))[0]):
        return 0.0
    lo, hi = 0.0, 1.0
    while bool(rejects(np.array([hi]))[0]):
        lo, hi = hi, 2.0 * hi
        if hi > upper:
            return upper
    while hi - lo > tol:
        grid = np.linspace(lo, hi, 65)
        rej = rejects(grid[1:-1])
        j = int(np.argmin(rej)) if not rej.all() else len(rej)  # rejected prefix length
        lo, hi = float(grid[j]), float(grid[j + 1])
    return lo


def _gdp_inverse_many(mu: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def inv(y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return special.ndtr(special.ndtri(np.clip(y, 0.0, 1.0)) - mu)

    return inv


def _eps_delta_inverse_many(eps: np.ndarray, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    e = np.exp(np.minimum(eps, 700.0))

    def inv(y: np.ndarray) -> np.ndarray:
        y = np.clip(y, 0.0, 1.0)  # r > 1 only once the hypothesis is already contradicted
        return np.maximum(0.0, np.maximum((y - delta) / e, 1.0 - delta - e * (1.0 - y)))

    return inv


def fdp_one_run_mu_lower_bound(correct: int, guesses: int, canaries: int, *, level: float) -> float:
    """(1 - level) lower bound on mu (mu-GDP) from one run: the largest mu rejected.

    ``level``: failure probability of the one-sided bound returned, in (0, 1).

    >>> fdp_one_run_mu_lower_bound(55, 100, 1000, level=0.05)
    0.0
    >>> round(fdp_one_run_mu_lower_bound(100, 100, 100, level=0.05), 3)
    1.703
    """
    c, k, m, tau = _check(correct, guesses, canaries, level)

    def rejects(mu: np.ndarray) -> np.ndarray:
        return _min_total_mass_many(c, k, m, tau, _gdp_inverse_many(mu), mu.size) > 1.0

    return _sup_rejected(rejects, _MU_MAX, 1e-6)


def fdp_one_run_epsilon_lower_bound(correct: int, guesses: int, canaries: int, delta: float, *,
                                    level: float, curve: str = "gdp") -> float:
    """eps lower bound at ``delta`` from the f-DP analysis of one run.

    ``curve="gdp"``: ``gdp_epsilon(mu_hat, delta)`` with ``mu_hat`` from
    :func:`fdp_one_run_mu_lower_bound` (valid for eps at delta when the mechanism's trade-off curve
    is Gaussian-shaped, see the module docstring).  ``curve="eps_delta"``: the largest eps such
    that the (eps, delta)-DP curve is rejected — no shape assumption.  ``level``: failure
    probability of the one-sided bound returned, in (0, 1).

    >>> round(fdp_one_run_epsilon_lower_bound(100, 100, 100, 1e-5, level=0.05, curve="eps_delta"), 2)
    3.49
    """
    c, k, m, tau = _check(correct, guesses, canaries, level)
    if curve == "gdp":
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        return gdp_epsilon(fdp_one_run_mu_lower_bound(c, k, m, level=tau), delta)
    if curve == "eps_delta":
        delta = check_prob("delta", delta, open_high=True)

        def rejects(eps: np.ndarray) -> np.ndarray:
            return _min_total_mass_many(c, k, m, tau, _eps_delta_inverse_many(eps, delta), eps.size) > 1.0

        return _sup_rejected(rejects, _EPS_MAX, 1e-6)
    raise ValueError(f"curve must be 'gdp' or 'eps_delta', got {curve!r}")


