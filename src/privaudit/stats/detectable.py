"""The smallest true ε each audit bound detects: the power of an audit at the size it ran.

An audit that certifies ε̂ = 0 and flags nothing says little unless it *could* have flagged something.
The functions here answer, for one bound at its sizes and error-budget share: how large must the true
ε of the audited mechanism be before the bound exceeds the claimed ε with probability ≥ ``power``
(default 0.8)? Each answer is an **idealisation in the auditor's favour** — an optimal canary (the
audited statistic separates "canary in" from "canary out" exactly along the mechanism's own trade-off
curve) and an oracle choice of the bound's free parameters (threshold, number of guesses) made
before the data are seen — so the detection threshold of a real audit, with a real canary and a
data-driven choice, is at least the number returned. ``math.inf`` means that no mechanism whose ε
is at most the search cap (``eps_max``, default 50) is detected with that probability.

Bounds covered:

* many-run black-box, tested against the claim's own curve
  (:func:`privaudit.stats.claim_runs.certify_claim_scores`): :func:`detectable_epsilon_blackbox`,
  exact binomial power;
* one run with m canaries (Steinke, Nasr & Jagielski 2023,
  :func:`privaudit.stats.one_run.one_run_epsilon_lower_bound`): :func:`detectable_epsilon_one_run`,
  exact binomial power;
* Game 3's Clopper-Pearson interval (Malek et al. 2021, :func:`privaudit.stats.game3.game3_epsilon`):
  :func:`detectable_epsilon_game3`, exact binomial power.

Not covered: LiDP (its XBern intervals depend on the correlation of the K canaries, which an ideal
canary model does not fix) and the white-box audit (model-based: its power is that of estimating σ,
not of a threshold test).

numpy/scipy only; imports nothing from privaudit but other ``stats`` modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from ._checks import check_end_level, check_int, check_prob
from .binomial import clopper_pearson
from .game3 import game3_epsilon
from .one_run import one_run_epsilon_lower_bound, one_run_p_value
from .tradeoff import TradeoffFamily

__all__ = [
    "OraclePower",
    "detectable_epsilon_blackbox",
    "detectable_epsilon_game3",
    "detectable_epsilon_one_run",
    "power_blackbox",
    "power_one_run",
]

_TOL = 1e-12  # as privaudit.stats.tradeoff: a point must lie this far below a curve to refute it
_EPS_MAX = 50.0  # default search cap on the true ε
_REL_TOL = 1e-4  # relative precision of the returned ε (bisection on the leakage parameter)


# --------------------------------------------------------------------------------------------- checks
def _check_power(power: float) -> float:
    return check_prob("power", power, open_low=True, open_high=True)


def _check_claimed(claimed_epsilon: float) -> float:
    try:
        v = float(claimed_epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"claimed_epsilon must be a finite number >= 0, got {claimed_epsilon!r}") from None
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"claimed_epsilon must be a finite number >= 0, got {claimed_epsilon!r}")
    return v


def _check_cap(eps_max: float, claimed: float) -> float:
    try:
        v = float(eps_max)
    except (TypeError, ValueError):
        raise ValueError(f"eps_max must be a finite number above claimed_epsilon, got {eps_max!r}") from None
    if not (math.isfinite(v) and v > claimed):
        raise ValueError(f"eps_max must be a finite number above claimed_epsilon={claimed:g}, got {eps_max!r}")
    return v


def _bisect_increasing(pred, lo: float, hi: float, rel: float = _REL_TOL) -> float:  # type: ignore[no-untyped-def]
    """Smallest x in (lo, hi] with pred(x) true, for pred monotone false → true; pred(hi) must hold."""
    while hi - lo > rel * max(hi, 1e-9):
        mid = 0.5 * (lo + hi)
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ------------------------------------------------------------------------------------------ black-box
def _theta_for_epsilon(family: TradeoffFamily, eps: float, delta: float, lo: float, hi: float) -> float:
    """The largest θ in [lo, hi] with family.epsilon(θ, δ) ≤ eps (ε is non-decreasing in θ); lo if none."""
    if family.epsilon(lo, delta) > eps:
        return lo
    if family.epsilon(hi, delta) <= eps:
        return hi
    for _ in range(200):
        if hi - lo <= 1e-10 * max(1.0, hi):
            break
        mid = 0.5 * (lo + hi)
        if family.epsilon(mid, delta) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


@lru_cache(maxsize=128)
def _refuting_fn_counts(family: TradeoffFamily, theta_gate: float, ci: int, co: int, level: float
                        ) -> NDArray[np.int64]:
    """J[k] for k = 0..co false positives: the certification refutes member θ_gate (ε̂ above the claim)
    iff the false-negative count is < J[k]. The region is a down-set in both counts (the Clopper-Pearson
    upper bounds increase with the counts and the curve is non-increasing), so it is this prefix.
    ``level`` is the bound's: each of the two one-sided upper bounds is at ``level / 2``."""
    u_fp = np.asarray(clopper_pearson(np.arange(co + 1), co, level=level / 2)[1], dtype=np.float64)
    u_fn = np.asarray(clopper_pearson(np.arange(ci + 1), ci, level=level / 2)[1], dtype=np.float64)
    f_at_fp = np.asarray(family.curve(theta_gate, u_fp), dtype=np.float64)
    f_at_fn = np.asarray(family.curve(theta_gate, u_fn), dtype=np.float64)
    # family.refutes: fnr < f(fpr) − tol  or  fpr < f(fnr) − tol
    cond = (u_fn[None, :] < f_at_fp[:, None] - _TOL) | (u_fp[:, None] < f_at_fn[None, :] - _TOL)
    return cond.sum(axis=1).astype(np.int64)


def _alpha_grid(co: int) -> NDArray[np.float64]:
    lo = min(1e-3 / co, 1e-6)
    return np.unique(np.concatenate([np.geomspace(lo, 0.5, 64), np.linspace(0.05, 0.5, 10)]))


def _power_one(a: float, b: float, J: NDArray[np.int64], ci: int, co: int) -> float:
    """P(FN < J[FP]) for FP ~ Bin(co, a), FN ~ Bin(ci, b), over the false-positive counts within 12
    standard deviations of the mean (the rest weighs < 1e-30)."""
    if not (0.0 <= a <= 1.0 and 0.0 <= b <= 1.0):
        return 0.0
    mean, sd = co * a, math.sqrt(co * a * (1.0 - a))
    k0, k1 = max(0, int(mean - 12.0 * sd) - 2), min(co, int(mean + 12.0 * sd) + 3)
    j = J[k0:k1 + 1]
    ok = j > 0
    if not ok.any():
        return 0.0
    # P(FP = k) as differences of the binomial cdf (absolute error ~1e-16 each: enough for a probability)
    kk = np.arange(k0 - 1, k1 + 1, dtype=np.float64)
    cum = np.where(kk >= 0, special.bdtr(np.maximum(kk, 0.0), co, a), 0.0)
    pmf = np.clip(np.diff(cum), 0.0, 1.0)[ok]
    cdf = special.bdtr((j[ok] - 1).astype(np.float64), ci, b)
    return min(float(np.dot(pmf, cdf)), 1.0)


def _power_at(true_family: TradeoffFamily, theta: float, J: NDArray[np.int64], ci: int, co: int
              ) -> tuple[float, float, float]:
    """(power, α, β): max over the oracle FPR grid of P(refute) for a test with FPR = α and FNR = β = f_θ(α),
    and over the mirrored tests FPR = f_θ(x), FNR = x (every curve here is symmetric); the best grid point
    is then refined twice on a 25-point grid between its neighbours."""
    grid = _alpha_grid(co)

    def pairs(x: NDArray[np.float64], mirrored: bool) -> list[tuple[float, float]]:
        fx = np.asarray(true_family.curve(theta, x), dtype=np.float64)
        return [(float(b), float(a)) if mirrored else (float(a), float(b)) for a, b in zip(x, fx)]

    best = (0.0, 0.5, 0.5)
    for mirrored in (False, True):
        x = grid
        for _ in range(3):  # the grid, then two zooms around its best point
            vals = [(_power_one(a, b, J, ci, co), a, b) for a, b in pairs(x, mirrored)]
            i = int(np.argmax([v[0] for v in vals]))
            if vals[i][0] > best[0]:
                best = vals[i]
            if vals[i][0] <= 0.0:
                break
            x = np.linspace(x[max(i - 1, 0)], x[min(i + 1, x.size - 1)], 25)
    return best


def _blackbox_setup(family: TradeoffFamily, claimed_epsilon: float, n_in: int, n_out: int, tune_fraction: float,
                    level: float, delta: float) -> tuple[float, int, int, NDArray[np.int64]]:
    if not isinstance(family, TradeoffFamily):
        raise ValueError(f"family must be a privaudit.stats.tradeoff.TradeoffFamily, got {type(family).__name__}")
    claimed = _check_claimed(claimed_epsilon)
    n_in = check_int("n_in", n_in, minimum=2)
    n_out = check_int("n_out", n_out, minimum=2)
    tf = check_prob("tune_fraction", tune_fraction, open_low=True, open_high=True)
    level = check_prob("level", level, open_low=True, open_high=True)
    delta = check_prob("delta", delta, open_high=True)
    ti, to = int(n_in * tf), int(n_out * tf)  # as certify_claim_scores
    if ti < 1 or to < 1 or ti >= n_in or to >= n_out:
        raise ValueError(f"n_in={n_in} / n_out={n_out} runs cannot be split at tune_fraction={tune_fraction}")
    ci, co = n_in - ti, n_out - to
    own = family.epsilon(family.theta_claim, delta)
    if not own <= claimed * (1.0 + 1e-9) + 1e-12:
        raise ValueError(f"the family's own member has epsilon {own:g} at delta={delta:g}, above "
                         f"claimed_epsilon={claimed:g}: it cannot carry the claim")
    # ε̂ > claimed ⇔ the point refutes θ_gate, the least private member whose ε at δ is ≤ the claim
    theta_gate = _theta_for_epsilon(family, claimed, delta, float(family.theta_claim), float(family.theta_max))
    J = _refuting_fn_counts(family, float(theta_gate), ci, co, level)
    return theta_gate, ci, co, J


@dataclass(frozen=True)
class OraclePower:
    """The power of the ideal black-box audit at one true member (:func:`power_blackbox`)."""

    power: float  #: P(ε̂ > claimed ε) with the oracle threshold
    fpr: float  #: the oracle threshold's false-positive rate α
    fnr: float  #: its false-negative rate, f_θ(α) on the true curve


def power_blackbox(family: TradeoffFamily, true_theta: float, *, claimed_epsilon: float, n_in: int, n_out: int,
                   tune_fraction: float, level: float, delta: float,
                   true_family: TradeoffFamily | None = None) -> OraclePower:
    """Probability that :func:`~privaudit.stats.claim_runs.certify_claim_scores` refutes the claim
    (ε̂ > ``claimed_epsilon``) when the true mechanism is member ``true_theta`` of ``true_family``
    (default ``family``, the claim's own) and the canary and threshold are ideal (see
    :func:`detectable_epsilon_blackbox`). Exact binomial sums; an upper bound on the power of any
    canary and any threshold chosen on the tuning runs for every mechanism whose curve is at or above
    that member's.

    >>> from privaudit.stats.tradeoff import GaussianFamily
    >>> kw = dict(claimed_epsilon=GaussianFamily(1.0).epsilon(1.0, 1e-5), n_in=2000, n_out=2000,
    ...           tune_fraction=0.2, level=0.01, delta=1e-5)
    >>> power_blackbox(GaussianFamily(1.0), 1.0, **kw).power < 0.01  # an honest mechanism: at most the level
    True
    >>> p = power_blackbox(GaussianFamily(1.0), 2.0, **kw)  # twice the claimed μ
    >>> p.power > 0.99, 0.0 < p.fpr < 0.5
    (True, True)
    """
    _, ci, co, J = _blackbox_setup(family, claimed_epsilon, n_in, n_out, tune_fraction, level, delta)
    tf = family if true_family is None else true_family
    th = float(true_theta)
    if not (th >= 0.0):
        raise ValueError(f"true_theta must be a number >= 0, got {true_theta!r}")
    return OraclePower(*_power_at(tf, th, J, ci, co))


def detectable_epsilon_blackbox(family: TradeoffFamily, *, claimed_epsilon: float, n_in: int, n_out: int,
                                tune_fraction: float, level: float, delta: float, power: float = 0.8,
                                true_family: TradeoffFamily | None = None, eps_max: float = _EPS_MAX) -> float:
    """The smallest true ε (at ``delta``) that the many-run black-box bound detects with probability ≥
    ``power`` at these sizes: ε(θ', δ) for the least private member θ' of ``true_family`` (default the
    claim's own ``family``) at which :func:`power_blackbox` reaches ``power``.

    The bound (:func:`~privaudit.stats.claim_runs.certify_claim_scores`): τ chosen on the first
    ``tune_fraction`` of each side, FP ~ Bin(c_out, FPR) and FN ~ Bin(c_in, FNR) counted on the
    ``c = n − int(n · tune_fraction)`` certification runs, one-sided Clopper-Pearson upper bounds at
    ``level/2`` each, and the point tested against ``family`` (Dong, Roth & Su 2022, Def. 2.1 and the
    soundness argument of :mod:`privaudit.stats.tradeoff`). It exceeds the claim iff the point refutes
    θ_gate, the least private member with ε(θ, δ) ≤ ``claimed_epsilon``.

    **Method (exact, no simulation).** The refuting region is a down-set in the two error counts, so
    for each false-positive count k the refuting false-negative counts are 0..J[k]−1 (J computed once
    from the Clopper-Pearson bounds and the claim's curve). For a threshold test with FPR α and FNR β,
    P(refute) = Σ_k Bin(k; c_out, α) · P(Bin(c_in, β) ≤ J[k] − 1).

    **Idealisation.** The canary is optimal: its test has β = f_θ'(α), the true curve (Neyman-Pearson;
    Dong et al. 2022 Def. 2.1), and α is chosen by an oracle (max over a grid of 74 FPRs and their
    mirror images, refined twice around the best). A real audit's threshold comes from tuning runs
    independent of the certification runs, so its power is an average of fixed-threshold powers, and
    larger error rates only lower the power (down-set): the returned ε is a lower bound on the detection threshold of every audit of this
    size with any canary, for every mechanism whose curve lies at or above f_θ' (up to the grid's
    resolution in α). The tuning share is not used by the ideal audit (it is what a real audit pays
    for choosing τ).

    Cost: one Clopper-Pearson table (cached) and ~20 bisection steps of ~250 binomial sums each: about
    0.3-1 s for 2000 runs per side with the analytic families (a
    :class:`~privaudit.stats.tradeoff.SubsampledGaussianFamily` needs one PLD per step).

    Args:
        family: the claim's trade-off family (:meth:`privaudit.claims.claim.PrivacyClaim.family`).
        claimed_epsilon: the claimed ε at ``delta`` (≥ the family's own ε at ``delta``).
        n_in, n_out: runs per side, tuning share included (as passed to ``certify_claim_scores``).
        tune_fraction, level, delta: as passed to ``certify_claim_scores``.
        power: the detection probability required, in (0, 1).
        true_family: the family the true mechanism is drawn from (default ``family``; the returned ε is then
            ≥ ``claimed_epsilon``). With another family the answer may lie below the claim: e.g. a
            polygon-shaped (0.56, 1e-5)-DP mechanism breaks a declared Gaussian curve of ε = 1 (its middle
            corner lies below G_μ) and 320 runs a side detect it.
        eps_max: search cap on the true ε; ``math.inf`` is returned when even the member at the cap is
            detected with probability < ``power``.

    Raises:
        ValueError: naming the bad argument.

    >>> from privaudit.stats.tradeoff import EpsDeltaFamily, GaussianFamily
    >>> e = detectable_epsilon_blackbox(EpsDeltaFamily(1.0, 1e-5), claimed_epsilon=1.0, n_in=2000, n_out=2000,
    ...                                 tune_fraction=0.2, level=0.01, delta=1e-5)
    >>> 1.0 < e < 3.0
    True
    >>> detectable_epsilon_blackbox(EpsDeltaFamily(1.0, 1e-5), claimed_epsilon=1.0, n_in=10, n_out=10,
    ...                             tune_fraction=0.2, level=0.01, delta=1e-5)  # 8 runs a side: nothing
    inf
    """
    pw = _check_power(power)
    theta_gate, ci, co, J = _blackbox_setup(family, claimed_epsilon, n_in, n_out, tune_fraction, level, delta)
    claimed = float(claimed_epsilon)
    cap = _check_cap(eps_max, claimed)
    tf = family if true_family is None else true_family
    if not isinstance(tf, TradeoffFamily):
        raise ValueError(f"true_family must be a TradeoffFamily or None, got {type(tf).__name__}")
    delta = float(delta)
    lo = 0.0 if tf is not family else float(theta_gate)
    hi = _theta_for_epsilon(tf, cap, delta, lo, float(tf.theta_max))
    if hi <= lo or _power_at(tf, hi, J, ci, co)[0] < pw:
        return math.inf
    if _power_at(tf, lo, J, ci, co)[0] >= pw:
        return float(tf.epsilon(lo, delta)) if lo > 0.0 else 0.0
    def detected(t: float) -> bool:
        return _power_at(tf, t, J, ci, co)[0] >= pw

    if lo > 0.0:  # bracket by doubling from the gate: the answer is usually within a few multiples of it
        h = 2.0 * lo
        while h < hi:
            if detected(h):
                hi = h
                break
            lo, h = h, 2.0 * h
    theta = _bisect_increasing(detected, lo, hi)
    return float(tf.epsilon(theta, delta))


# -------------------------------------------------------------------------------------------- one run
@lru_cache(maxsize=4096)
def _one_run_threshold(r: int, m: int, claimed: float, delta: float, level: float) -> int:
    """Smallest v with one_run_epsilon_lower_bound(v, r, m, δ, level=level) > claimed (r + 1 if none)."""
    def refutes(v: int) -> bool:
        return one_run_epsilon_lower_bound(v, r, m, delta, level=level) > claimed

    if not refutes(r):
        return r + 1
    # the p-value at the claim locates the crossing cheaply (it is what the bound inverts); the real
    # bound then fixes it exactly (the bound is non-decreasing in v)
    lo, hi = -1, r  # refutes(hi) holds; lo does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 0 and one_run_p_value(mid, r, m, claimed, delta) < level:
            hi = mid
        else:
            lo = mid
    v = hi
    while v <= r and not refutes(v):
        v += 1
    while v > 0 and refutes(v - 1):
        v -= 1
    return v


def _guess_grid(canaries: int, k_grid: Sequence[tuple[float, float]] | None) -> tuple[tuple[int, ...], bool]:
    if k_grid is None:  # oracle number of guesses: a geometric grid of r up to m
        rs = np.unique(np.rint(np.geomspace(1, canaries, 24)).astype(int))
        return tuple(int(x) for x in rs if x >= 1), False
    try:
        grid = [(float(a), float(b)) for a, b in k_grid]
    except (TypeError, ValueError):
        raise ValueError(f"k_grid must be None or a sequence of (k_plus, k_minus) fractions, got {k_grid!r}") from None
    if not grid or any(not (0 <= a and 0 <= b and 0 < a + b <= 1) for a, b in grid):
        raise ValueError(f"k_grid entries must be fractions (k_plus, k_minus) >= 0 with 0 < sum <= 1, got {k_grid!r}")
    rs = [int(round(a * canaries)) + int(round(b * canaries)) for a, b in grid]
    return tuple(r for r in rs if r > 0), True


def _one_run_power(eps: float, thresholds: Sequence[tuple[int, int]], union: bool) -> float:
    p = 1.0 / (1.0 + math.exp(-min(eps, 700.0)))
    pw = [float(stats.binom.sf(v - 1, r, p)) if v <= r else 0.0 for r, v in thresholds]
    return min(1.0, sum(pw)) if union else max(pw)


def power_one_run(true_epsilon: float, *, claimed_epsilon: float, canaries: int, level: float, delta: float,
                  k_grid: Sequence[tuple[float, float]] | None = None) -> float:
    """Upper bound on the probability that the one-run bound exceeds ``claimed_epsilon`` when the
    training algorithm is ``true_epsilon``-DP (see :func:`detectable_epsilon_one_run` for the model).

    >>> power_one_run(1.0, claimed_epsilon=1.0, canaries=1000, level=0.05, delta=1e-5) <= 0.05
    True
    >>> power_one_run(4.0, claimed_epsilon=1.0, canaries=1000, level=0.05, delta=1e-5) > 0.99
    True
    """
    claimed, m, level_r, delta, thr, union = _one_run_setup(claimed_epsilon, canaries, level, delta, k_grid)
    e = float(true_epsilon)
    if not (e >= 0.0):
        raise ValueError(f"true_epsilon must be a number >= 0, got {true_epsilon!r}")
    return _one_run_power(e, thr, union)


def _one_run_setup(claimed_epsilon: float, canaries: int, level: float, delta: float,
                   k_grid: Sequence[tuple[float, float]] | None
                   ) -> tuple[float, int, float, float, list[tuple[int, int]], bool]:
    claimed = _check_claimed(claimed_epsilon)
    m = check_int("canaries", canaries, minimum=1)
    level = check_prob("level", level, open_low=True, open_high=True)
    delta = check_prob("delta", delta, open_high=True)
    rs, union = _guess_grid(m, k_grid)
    if not rs:
        raise ValueError(f"k_grid={k_grid!r} makes no guess with canaries={m}")
    level_r = level / len(rs) if union else level
    thr = [(r, _one_run_threshold(r, m, claimed, delta, level_r)) for r in rs]
    return claimed, m, level_r, delta, thr, union


def detectable_epsilon_one_run(*, claimed_epsilon: float, canaries: int, level: float, delta: float,
                               power: float = 0.8, k_grid: Sequence[tuple[float, float]] | None = None,
                               eps_max: float = _EPS_MAX) -> float:
    """The smallest pure ε' at which the one-run bound (Steinke, Nasr & Jagielski 2023, "Privacy
    Auditing with One (1) Training Run", arXiv:2305.08846, main theorem — Thm. 3 of v1 as cited in
    :mod:`privaudit.stats.one_run`) exceeds ``claimed_epsilon`` with probability ≥ ``power``.

    **Model.** m canaries, each included w.p. 1/2; r guesses; the bound
    :func:`~privaudit.stats.one_run.one_run_epsilon_lower_bound` (v, r, m, δ, level) exceeds the claim iff
    v ≥ v*(r) (computed exactly with that function; it is non-decreasing in v). For an ε'-DP algorithm
    the number of correct guesses W is stochastically dominated by Bin(r, e^ε'/(1 + e^ε')) (the
    paper's pure-DP proposition), attained by ε'-randomized response of the inclusion bits with the
    ideal guesser, so P(refute) ≤ P(Bin(r, e^ε'/(1 + e^ε')) ≥ v*(r)) for every ε'-DP algorithm, canary
    and score.

    **Idealisation.** ``k_grid=None``: the number of guesses r is chosen by an oracle (max over a
    geometric grid of 24 values up to m) and the bound runs at the full ``level``. With the audit's
    own ``k_grid`` ((k+, k−) fractions of m, as :func:`privaudit.audits.one_run.bounds_from_losses`:
    Bonferroni, each r at level/len(grid), max reported) the power is bounded by the union bound
    Σ_g P(Bin(r_g, ·) ≥ v*_g) — still an upper bound, so either way the returned ε' is a lower bound
    on the detection threshold of a real one-run audit of this size. The ε' is the pure-DP ε; the ε at
    ``delta`` of ε'-randomized response is smaller by at most 2δ.

    Args:
        claimed_epsilon: the claimed ε at ``delta``.
        canaries: m.
        level: the bound's failure probability (β of the paper; the audit's budget share).
        delta: δ of the claim (the audit passes ``max(delta, PURE_DELTA)``).
        power: the detection probability required, in (0, 1).
        k_grid: None (oracle r) or the audit's (k+, k−) grid.
        eps_max: search cap; ``math.inf`` when ε' = eps_max is not detected with probability ``power``.

    Raises:
        ValueError: naming the bad argument.

    >>> e = detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=1000, level=0.05, delta=1e-5)
    >>> 1.0 < e < 2.0
    True
    >>> g = ((0.05, 0.05), (0.1, 0.1), (0.25, 0.25), (0.5, 0.5))  # the audit's grid, Bonferroni
    >>> 1.0 < detectable_epsilon_one_run(claimed_epsilon=1.0, canaries=1000, level=0.05, delta=1e-5, k_grid=g) < 2.0
    True
    """
    pw = _check_power(power)
    claimed, m, level_r, delta, thr, union = _one_run_setup(claimed_epsilon, canaries, level, delta, k_grid)
    cap = _check_cap(eps_max, claimed)
    if _one_run_power(cap, thr, union) < pw:
        return math.inf
    lo = claimed
    if _one_run_power(lo, thr, union) >= pw:  # only when power <= level (the claim itself is "detected")
        return lo
    return _bisect_increasing(lambda e: _one_run_power(e, thr, union) >= pw, lo, cap)


# ------------------------------------------------------------------------------------------- Game 3
@lru_cache(maxsize=1024)
def _game3_threshold(n: int, level: float, delta: float, claimed: float) -> int:
    def refutes(c: int) -> bool:
        return game3_epsilon(c, n, delta, level=level)[0] > claimed

    if not refutes(n):
        return n + 1
    lo, hi = -1, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 0 and refutes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def detectable_epsilon_game3(*, claimed_epsilon: float, guesses: int, level: float, delta: float = 0.0,
                             power: float = 0.8, eps_max: float = _EPS_MAX) -> float:
    """The smallest pure ε' at which Game 3's Clopper-Pearson lower end (Malek et al. 2021, "Antipodes
    of Label Differential Privacy: PATE and ALIBI", App. B, Theorem B.1;
    :func:`~privaudit.stats.game3.game3_epsilon` with ``level``, ``delta``) exceeds ``claimed_epsilon``
    with probability ≥ ``power`` over ``guesses`` non-abstained guesses.

    **Idealisation.** Every canary is guessed (no abstention) by an ideal adversary against ε'-label
    randomized response: each guess is right independently with probability e^ε'/(1 + e^ε'), the most
    Theorem B.1 allows an ε'-DP mechanism (Malek et al. treat the N guesses as independent games), and
    the threshold τ is an oracle's (a real audit pays Bonferroni over its τ grid: pass that ``level``).
    Exact binomial power; the detection threshold of a real Game 3 audit of this size is at least this.

    Args:
        claimed_epsilon: the claimed ε for the label (replace_label) neighbourhood.
        guesses: the number of non-abstained guesses (canaries × runs).
        level: failure probability of the one-sided lower bound (the Clopper-Pearson lower end) that
            ``game3_epsilon`` is called at, in (0, 0.5).
        delta: δ passed to ``game3_epsilon``.
        power: the detection probability required, in (0, 1).
        eps_max: search cap; ``math.inf`` when not reached.

    Raises:
        ValueError: naming the bad argument.

    >>> e = detectable_epsilon_game3(claimed_epsilon=1.0, guesses=1000, level=0.05)
    >>> 1.0 < e < 1.6
    True
    >>> detectable_epsilon_game3(claimed_epsilon=1.0, guesses=3, level=0.05)  # 3 guesses cannot show ε > 1
    inf
    """
    pw = _check_power(power)
    claimed = _check_claimed(claimed_epsilon)
    n = check_int("guesses", guesses, minimum=1)
    level = check_end_level(level)
    delta = check_prob("delta", delta)
    cap = _check_cap(eps_max, claimed)
    c_star = _game3_threshold(n, level, delta, claimed)
    if c_star > n:
        return math.inf

    def pw_at(e: float) -> float:
        return float(stats.binom.sf(c_star - 1, n, 1.0 / (1.0 + math.exp(-min(e, 700.0)))))

    if pw_at(cap) < pw:
        return math.inf
    if pw_at(claimed) >= pw:
        return claimed
    return _bisect_increasing(lambda e: pw_at(e) >= pw, claimed, cap)
