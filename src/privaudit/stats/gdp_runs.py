"""Many-run black-box audit statistics: one threshold test, exact binomial bounds, the GDP view.

An audit trains ``n_in`` models with a canary and ``n_out`` without it (independent runs) and
scores each final model; a threshold τ turns the scores into a test "score > τ ⇒ canary was in".
Its false-positive rate FPR = P_out(score > τ) and false-negative rate FNR = P_in(score ≤ τ) are
bounded by one-sided Clopper-Pearson bounds (:func:`privaudit.stats.binomial.clopper_pearson`),
each at ``level / 2`` so that both hold together with probability ≥ 1 − level.

Two lower bounds come from the same bounded point (FPR_U, FNR_U):

* **assumption-free** (ε, δ)-DP bound (Kairouz et al. 2015; Jagielski et al. 2020 §3; Nasr et al.
  2023 §2): an (ε, δ)-DP mechanism has ``FPR + e^ε FNR ≥ 1 − δ`` and ``FNR + e^ε FPR ≥ 1 − δ``, so
  ``ε ≥ max(log((1 − δ − FNR_U)/FPR_U), log((1 − δ − FPR_U)/FNR_U))``.
* **GDP view** (Dong, Roth & Su 2022, Def. 2.6 and Cor. 2.13; used for auditing by Nasr et al. 2023
  "Tight Auditing of DP ML" §5 and Annamalai & De Cristofaro 2024): a μ-GDP mechanism has
  ``FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)``, so the point rules out μ-GDP for every
  ``μ < μ_L = Φ⁻¹(1 − FPR_U) − Φ⁻¹(FNR_U)``. Converting μ_L to ε at δ with
  :func:`privaudit.stats.fdp_one_run.gdp_epsilon` is valid **under the assumption that the
  audited mechanism's trade-off curve is a Gaussian one** (true for the Gaussian mechanism; for
  DP-SGD an approximation, Dong et al. 2022 Thm. 3.5 CLT); the bound is then "the recipe is not
  (ε, δ)-DP with a GDP-shaped curve". This assumption is stated in every result and is the reason
  this is reported next to, not instead of, the assumption-free bound.

Choosing τ on the same runs that certify it overclaims: :func:`select_threshold_runs` looks only at
tuning runs, :func:`certify_threshold_runs` only at the disjoint certification runs.

:func:`last_iterate_epsilon` is the ceiling a final-model audit of DP-SGD can reach under the
linear heuristic of Steinke et al. 2024 ("The Last Iterate Advantage", arXiv:2410.06186, §3).

numpy/scipy only; imports nothing from privaudit but other ``stats`` modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from privaudit.stats._checks import check_int, check_prob
from privaudit.stats.binomial import clopper_pearson
from privaudit.stats.fdp_one_run import gdp_epsilon

__all__ = [
    "GdpRunsBound",
    "LastIterateCeiling",
    "ThresholdChoice",
    "certify_scores",
    "certify_threshold_runs",
    "gdp_mu_from_rates",
    "last_iterate_epsilon",
    "rate_epsilon",
    "select_threshold_runs",
]


def _scores(name: str, s: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(s, dtype=np.float64).ravel()
    if a.size < 1:
        raise ValueError(f"{name} must hold at least one score, got an empty array")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds {int((~np.isfinite(a)).sum())} non-finite scores; "
                         "clip log-probabilities before scoring (e.g. log(max(p, 1e-300)))")
    return a


def gdp_mu_from_rates(fpr: float, fnr: float) -> float:
    """μ of the Gaussian trade-off curve through (FPR, FNR), clamped at 0 (Dong et al. 2022, Def. 2.6).

    ``μ = Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)``; any μ'-GDP mechanism with μ' < μ has a larger FNR at this FPR.

    >>> round(gdp_mu_from_rates(0.5, 0.5), 6)
    0.0
    >>> round(gdp_mu_from_rates(0.3085375387, 0.3085375387), 4)  # Φ(-0.5) both: μ = 1
    1.0
    >>> gdp_mu_from_rates(0.0, 0.2)
    inf
    """
    fpr = check_prob("fpr", fpr)
    fnr = check_prob("fnr", fnr)
    if fpr == 0.0 or fnr == 0.0:
        return math.inf if fpr + fnr < 1.0 else 0.0
    return max(0.0, float(stats.norm.isf(fpr) - stats.norm.ppf(fnr)))


def rate_epsilon(fpr: float, fnr: float, delta: float) -> float:
    """Assumption-free ε lower bound from one (FPR, FNR) point at δ (Kairouz et al. 2015, Thm. 2.1).

    ``max(log((1 − δ − FNR)/FPR), log((1 − δ − FPR)/FNR), 0)``; ``inf`` when a rate is 0 and the
    other below 1 − δ.

    >>> round(rate_epsilon(0.1, 0.5, 0.0), 4)  # log(0.5 / 0.1)
    1.6094
    >>> rate_epsilon(0.5, 0.5, 1e-5)
    0.0
    """
    fpr = check_prob("fpr", fpr)
    fnr = check_prob("fnr", fnr)
    delta = check_prob("delta", delta)
    best = 0.0
    for a, b in ((fnr, fpr), (fpr, fnr)):
        num = 1.0 - delta - a
        if num <= 0.0:
            continue
        best = max(best, math.inf if b == 0.0 else math.log(num / b))
    return best


def _rates(s_in: NDArray[np.float64], s_out: NDArray[np.float64], taus: NDArray[np.float64]
           ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(false positives, false negatives) counts at every τ (test: score > τ ⇒ in)."""
    fp = s_out.size - np.searchsorted(np.sort(s_out), taus, side="right")
    fn = np.searchsorted(np.sort(s_in), taus, side="right")
    return fp.astype(np.int64), fn.astype(np.int64)


def _upper(k: NDArray[np.int64] | int, n: int, level: float) -> NDArray[np.float64]:
    """One-sided Clopper-Pearson upper bound failing with probability ``level``."""
    return np.asarray(clopper_pearson(np.asarray(k), n, level=level)[1], dtype=np.float64)


@dataclass(frozen=True)
class ThresholdChoice:
    """A threshold chosen on tuning runs only (:func:`select_threshold_runs`)."""

    tau: float
    objective: str
    tuning_in: int
    tuning_out: int
    candidates: int
    tuning_value: float


def select_threshold_runs(
    tune_in: ArrayLike, tune_out: ArrayLike, *, objective: str = "gdp", level: float,
    delta: float = 1e-5, certify_in: int | None = None, certify_out: int | None = None, max_candidates: int = 512,
    smooth: bool = False,
) -> ThresholdChoice:
    """Choose τ on tuning runs: the τ whose bound, computed as if these were certification counts
    rescaled to the certification sizes, is largest (``objective`` ``"gdp"``: μ_L; ``"rate"``: ε_L).

    Candidates: midpoints of the pooled sorted tuning scores (at most ``max_candidates`` quantiles).
    ``smooth``: judge each τ by the rates of normal fits to the tuning scores (plus a fine grid of
    τ) instead of the empirical rates: a less noisy choice when the tuning runs are few (it only
    chooses τ; the certified bound makes no normality assumption through it).

    >>> c = select_threshold_runs(np.arange(100) + 200.0, np.arange(100.0), level=0.05)
    >>> 99.0 < c.tau < 200.0
    True
    """
    if objective not in ("gdp", "rate"):
        raise ValueError(f"objective must be 'gdp' or 'rate', not {objective!r}")
    level = check_prob("level", level, open_low=True, open_high=True)
    s_in, s_out = _scores("tune_in", tune_in), _scores("tune_out", tune_out)
    pooled = np.unique(np.concatenate([s_in, s_out]))
    if pooled.size > max_candidates:
        pooled = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, max_candidates)))
    taus = pooled if pooled.size == 1 else np.concatenate([(pooled[:-1] + pooled[1:]) / 2.0, pooled[-1:]])
    n_ci = s_in.size if certify_in is None else check_int("certify_in", certify_in, minimum=1)
    n_co = s_out.size if certify_out is None else check_int("certify_out", certify_out, minimum=1)
    if smooth and s_in.size >= 2 and s_out.size >= 2 and s_in.std() > 0 and s_out.std() > 0:
        # rates of normal fits to the tuning scores (a smooth, less noisy choice; validity does not
        # depend on it: τ is a function of the tuning runs only)
        m1, sd1, m0, sd0 = s_in.mean(), s_in.std(ddof=1), s_out.mean(), s_out.std(ddof=1)
        grid = np.linspace(min(m0 - 4 * sd0, m1 - 4 * sd1), max(m0 + 8 * sd0, m1 + 4 * sd1), 2001)
        taus = np.unique(np.concatenate([taus, grid]))
        fpr_t, fnr_t = stats.norm.sf((taus - m0) / sd0), stats.norm.cdf((taus - m1) / sd1)
    else:
        fp, fn = _rates(s_in, s_out, taus)
        fpr_t, fnr_t = fp / s_out.size, fn / s_in.size
    # expected certification counts at the tuning rates
    kfp = np.rint(fpr_t * n_co).astype(np.int64)
    kfn = np.rint(fnr_t * n_ci).astype(np.int64)
    fpr_u, fnr_u = _upper(kfp, n_co, level / 2), _upper(kfn, n_ci, level / 2)
    if objective == "gdp":
        vals = np.maximum(0.0, stats.norm.isf(fpr_u) - stats.norm.ppf(fnr_u))
    else:
        vals = np.array([rate_epsilon(float(a), float(b), delta) for a, b in zip(fpr_u, fnr_u)])
    vals = np.where(np.isfinite(vals), vals, 1e300)
    i = int(np.argmax(vals))
    return ThresholdChoice(tau=float(taus[i]), objective=objective, tuning_in=int(s_in.size),
                           tuning_out=int(s_out.size), candidates=int(taus.size), tuning_value=float(vals[i]))


@dataclass(frozen=True)
class GdpRunsBound:
    """Certified bounds of one threshold test on certification runs (:func:`certify_threshold_runs`)."""

    tau: float
    n_in: int
    n_out: int
    false_positives: int
    false_negatives: int
    fpr_upper: float
    fnr_upper: float
    mu_lower_bound: float
    eps_lower_bound_gdp: float
    eps_lower_bound_rate: float
    mu_point: float
    level: float
    delta: float
    assumption_gdp: str = ("the audited mechanism's trade-off curve is Gaussian (mu-GDP for some mu): "
                           "eps_lower_bound_gdp = gdp_epsilon(mu_lower_bound, delta)")
    assumption_rate: str = "none (exact binomial bounds on independent runs)"


def certify_threshold_runs(s_in: ArrayLike, s_out: ArrayLike, tau: float, *, level: float,
                           delta: float = 1e-5) -> GdpRunsBound:
    """Bounds at a fixed τ from certification runs disjoint from those that chose τ.

    With probability ≥ 1 − ``level`` (over the certification runs, τ fixed beforehand) both
    FPR ≤ FPR_U and FNR ≤ FNR_U, hence the mechanism is not μ-GDP for μ < μ_L and not (ε, δ)-DP
    for ε < ``eps_lower_bound_rate``.

    >>> rng = np.random.default_rng(0)
    >>> b = certify_threshold_runs(rng.normal(1.0, 1, 20000), rng.normal(0, 1, 20000), 0.5, level=0.05)
    >>> 0.9 < b.mu_lower_bound < 1.0 < b.mu_point + 0.05
    True
    """
    level = check_prob("level", level, open_low=True, open_high=True)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    si, so = _scores("s_in", s_in), _scores("s_out", s_out)
    tau = float(tau)
    if not math.isfinite(tau):
        raise ValueError(f"tau must be finite, got {tau!r}")
    fp, fn = _rates(si, so, np.array([tau]))
    kfp, kfn = int(fp[0]), int(fn[0])
    fpr_u = float(_upper(kfp, so.size, level / 2))
    fnr_u = float(_upper(kfn, si.size, level / 2))
    mu_l = gdp_mu_from_rates(fpr_u, fnr_u)
    mu_pt = gdp_mu_from_rates(min(max(kfp, 0.5) / so.size, 1.0), min(max(kfn, 0.5) / si.size, 1.0))
    return GdpRunsBound(
        tau=tau, n_in=int(si.size), n_out=int(so.size), false_positives=kfp, false_negatives=kfn,
        fpr_upper=fpr_u, fnr_upper=fnr_u, mu_lower_bound=mu_l,
        eps_lower_bound_gdp=gdp_epsilon(mu_l, delta) if math.isfinite(mu_l) else math.inf,
        eps_lower_bound_rate=rate_epsilon(fpr_u, fnr_u, delta), mu_point=mu_pt, level=level, delta=delta,
    )


@dataclass(frozen=True)
class LastIterateCeiling:
    """The last-iterate heuristic of Steinke et al. 2024 for one DP-SGD recipe."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    mu: float
    eps_gdp: float
    eps_exact: float
    method: str = ("Steinke et al. 2024 (arXiv:2410.06186) §3 linear heuristic: the last iterate along the "
                   "canary's direction is P = N(0, T sigma^2) without it and Q = Binomial(T, q) + N(0, T sigma^2) "
                   "with it (units of C); eps_exact = smallest eps with max(H_eps(Q||P), H_eps(P||Q)) <= delta "
                   "(hockey-stick divergences, exact up to float: the likelihood ratio is monotone); "
                   "mu = q sqrt(T) / sigma, eps_gdp = gdp_epsilon(mu, delta) (mean-shift Gaussian approximation)")


def _mixture_delta(eps: float, k: NDArray[np.float64], logw: NDArray[np.float64], s: float) -> float:
    """max(H_e^ε(Q‖P), H_e^ε(P‖Q)) for P = N(0, s²), Q = Σ_k w_k N(k, s²) (k ≥ 0, LR increasing)."""
    def log_lr(x: float) -> float:
        return float(special.logsumexp(logw + (k * x - k * k / 2.0) / (s * s)))

    def root(target: float) -> float:
        lo, hi = -1.0, 1.0
        while log_lr(lo) > target:
            lo *= 2.0
        while log_lr(hi) < target:
            hi *= 2.0
        return float(optimize.brentq(lambda x: log_lr(x) - target, lo, hi, xtol=1e-12 * s, maxiter=500))

    w = np.exp(logw)
    # Q‖P: region x > a with LR(a) = e^eps
    a = root(eps)
    d1 = float(np.sum(w * stats.norm.sf((a - k) / s)) - math.exp(eps) * stats.norm.sf(a / s))
    # P‖Q: region x < b with LR(b) = e^-eps; LR(x) → w_0 = (1 − q)^T as x → −∞ (k = 0 term), so the
    # region is empty (divergence 0) when e^-eps ≤ w_0
    if k[0] == 0.0 and -eps <= logw[0]:
        return max(d1, 0.0)
    b = root(-eps)
    d2 = float(stats.norm.cdf(b / s) - math.exp(eps) * np.sum(w * stats.norm.cdf((b - k) / s)))
    return max(d1, d2, 0.0)


def last_iterate_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> LastIterateCeiling:
    """ε of the last iterate of DP-SGD under the linear heuristic (Steinke et al. 2024, §3).

    For a linear loss, the final parameters projected on the canary's gradient direction are
    θ_0 − η(Σ_t B_t + Z) with B_t ~ Bernoulli(q) (the canary is in batch t) and Z ~ N(0, Tσ²)
    (units of the clip norm C); the other examples' contributions are independent of the canary.
    The heuristic's ε is that of the pair (N(0, Tσ²), Binomial(T, q) + N(0, Tσ²)), computed here
    exactly (the likelihood ratio is increasing in x, so each hockey-stick divergence is a
    one-sided tail difference) and, as a mean-shift approximation, μ = q√T/σ → ``gdp_epsilon``.

    >>> c = last_iterate_epsilon(4.6484375, 64 / 899, 280, 1e-5)  # digits head claiming eps = 1
    >>> round(c.mu, 3), round(c.eps_gdp, 2)
    (0.256, 0.95)
    >>> c.eps_exact >= c.eps_gdp - 0.05
    True
    """
    sigma = float(noise_multiplier)
    if not (sigma > 0.0) or not math.isfinite(sigma):
        raise ValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
    q = check_prob("sample_rate", sample_rate, open_low=True)
    T = check_int("steps", steps, minimum=1)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    s = sigma * math.sqrt(T)
    k = np.arange(T + 1, dtype=np.float64)
    logw = stats.binom.logpmf(k, T, q)
    keep = logw > -700.0
    k, logw = k[keep], logw[keep]
    mu = q * math.sqrt(T) / sigma
    if _mixture_delta(0.0, k, logw, s) <= delta:
        eps = 0.0
    else:
        hi = 1.0
        while _mixture_delta(hi, k, logw, s) > delta:
            hi *= 2.0
            if hi > 1e4:
                break
        eps = float(optimize.brentq(lambda e: _mixture_delta(e, k, logw, s) - delta, 0.0, hi, xtol=1e-8))
    return LastIterateCeiling(noise_multiplier=sigma, sample_rate=q, steps=T, delta=delta, mu=mu,
                              eps_gdp=gdp_epsilon(mu, delta), eps_exact=eps)


def certify_scores(s_in: ArrayLike, s_out: ArrayLike, *, tune_fraction: float, level: float, delta: float
                   ) -> tuple[GdpRunsBound, GdpRunsBound, int, int]:
    """Split each side into tuning (first share) and certification runs; τ_gdp and τ_rate chosen on
    tuning runs only, each certified at ``level`` on the certification runs.

    Returns ``(gdp, rate, tuning_in, tuning_out)``: the GDP-view bound at τ_gdp, the assumption-free
    bound at τ_rate, and how many runs of each side only chose the thresholds.

    >>> rng = np.random.default_rng(0)  # a 1-GDP mechanism: μ_L just below 1
    >>> g, r, ti, to = certify_scores(rng.normal(1.0, 1, 5000), rng.normal(0.0, 1, 5000), tune_fraction=0.2,
    ...                               level=0.05, delta=1e-5)
    >>> (ti, to), round(g.mu_lower_bound, 2), g.eps_lower_bound_gdp > r.eps_lower_bound_rate > 0
    ((1000, 1000), 0.91, True)
    """
    s_in, s_out = np.asarray(s_in, np.float64), np.asarray(s_out, np.float64)
    ti, to = int(s_in.size * tune_fraction), int(s_out.size * tune_fraction)
    if ti < 1 or to < 1 or ti >= s_in.size or to >= s_out.size:
        raise ValueError(f"{s_in.size} / {s_out.size} runs cannot be split at tune_fraction={tune_fraction}")
    ci, co = s_in.size - ti, s_out.size - to
    kw = dict(level=level, delta=delta, certify_in=ci, certify_out=co)
    t_gdp = select_threshold_runs(s_in[:ti], s_out[:to], objective="gdp", smooth=True, **kw)
    t_rate = select_threshold_runs(s_in[:ti], s_out[:to], objective="rate", **kw)
    g = certify_threshold_runs(s_in[ti:], s_out[to:], t_gdp.tau, level=level, delta=delta)
    r = certify_threshold_runs(s_in[ti:], s_out[to:], t_rate.tau, level=level, delta=delta)
    return g, r, ti, to
