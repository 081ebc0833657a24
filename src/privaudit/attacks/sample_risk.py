"""Per-sample privacy risk that separates leakage from difficulty (LiRA, Carlini et al. 2022).

A loss-rank score ("how low is this sample's loss") flags *hard* samples: an unusual sample has a
high loss under every model, trained on it or not, so the most "exposed" samples by rank are often
samples the model never saw. Memorization is a *difference*: the target model M_D is more
confident on x than models of the same trainer that did not see x. This module measures that
difference per sample with reference models (Carlini et al. 2022, "Membership Inference Attacks
From First Principles", online LiRA) and tests it with a multiplicity correction:

1. **Reference models.** K models of the defender's own trainer T_D (the batched trainer for
   ``torch_mlp`` / ``dp_sgd``, ``make_defender`` fits for other kinds; see
   :func:`privaudit.attacks.mia_reference.train_subset_confidences`), each on a class-stratified
   random subset of *all* samples of the size of the Defender set, in complementary pairs
   (disjoint halves) so that every sample is IN for about K/2 models and OUT for the rest. The
   reference models see exactly as much data as M_D, so M_D's statistic on a sample it did not
   train on is a draw from the OUT distribution. This is the evaluator's measurement, not an
   LTU attacker: it knows every sample's membership and may train on Defender data.
2. **Statistic.** φ(x) = log(p_y / (1 − p_y)) (logit-scaled confidence of the true label,
   p clipped to [:data:`P_CLIP`, 1 − :data:`P_CLIP`]). Per
   sample, Gaussian fits N(μ_in(x), σ_in²(x)) and N(μ_out(x), σ_out²(x)) on the IN and OUT
   reference models. Per-sample variances are moderated (empirical Bayes, Smyth 2004: each
   σ² is shrunk to a common prior fitted to all samples, which adds prior degrees of freedom)
   so that few reference models still give stable per-sample scales: a hard sample whose OUT
   confidence varies a lot needs a large deviation to count.
3. **Risk** (the effect size) = per-example LiRA log-likelihood ratio
   log N(φ_D(x); μ_in, σ_in²) − log N(φ_D(x); μ_out, σ_out²) (> 0: M_D looks like a model
   trained on x), with a percentile bootstrap interval over the reference models.
4. **Significance** (the uncertainty) = one-sided p-value of M_D's φ(x) against the OUT
   distribution: the Student-t predictive test (φ_D − μ_out) / (σ̃_out √(1 + 1/K_out)) with the
   moderated degrees of freedom — exact for Gaussian φ, and it accounts for μ_out and σ_out
   being estimated from K_out models. H0: "M_D behaves on x like a model that never saw x".
5. **Calibration on the negative control** (issue 34). M_D never trained on the Reserved
   samples, so their statistics are draws from H0. The statistic is S = −log p_t, and S = 0
   (p = 1) unless the risk is positive: a sample where M_D does not look more like a model trained
   on it can never be flagged. The Student-t tail is only as good as the Gaussian fit of φ across
   reference models, and that fails for deterministic and near-deterministic trainers (svc,
   gaussian_nb, knn, trees, mip, a deterministic user trainer): their OUT distributions are narrow,
   skewed, tied or at the clip, and deviations of a few hundredths of a logit got p = 1e-5 to
   5e-15 — on Reserved samples as often as on Defender ones (digits, all defenders: empirical FDR
   0.5-0.96 at level 0.05). The p-value of a sample is therefore taken against the Reserved
   statistics themselves (:func:`control_p_values`):

   * the **conformal p-value** p = (1 + #{r: S_r >= S}) / (n_R + 1) (Bates, Candès, Lei, Romano &
     Sesia 2023, "Testing for outliers with conformal p-values", Ann. Statist. 51(1), Eq. (2)). If
     the split into Defender and Reserved is random and training on x leaves M_D's φ(x) unchanged,
     a Defender sample's S is exchangeable with the Reserved ones, p is super-uniform, and
     Benjamini-Hochberg on conformal p-values controls the FDR (their Theorem 2: the conformal
     p-values are PRDS). It needs no model of φ: ties count as "at least as extreme", so identical
     statistics get identical p-values and a statistic tied with the control's top values gets at
     least (1 + ties) / (n_R + 1) — a utility-0 model's ties never give small p-values.
   * **beyond the control's reach**: n_R Reserved samples cannot certify a p-value below
     1 / (n_R + 1), but BH over n_D tests needs level / n_D to flag fewer than ~1/level samples.
     Above the (1 − :data:`TAIL_FRACTION`) quantile u of the control statistics the exceedances
     S − u get a tail model, as for permutation p-values (Knijnenburg, Wessels, Reinders &
     Shmulevich 2009, "Fewer permutations, more accurate P-values", Bioinformatics 25(12), i161;
     Pickands-Balkema-de Haan): P(S >= s) ≈ (1 + #{S_r > u}) / (n_R + 1) · GPD_ξ,σ survival of s − u,
     exponential (ξ = 0, σ = mean excess; exact when the parametric p-values are exact, σ = 1, or
     off by a power p^(1/σ)) unless a generalised Pareto with ξ > 0 (a heavier tail) fits
     significantly better (likelihood ratio, one-sided 5 %). Up to the control's top statistic the
     p-value is the larger of the conformal one and the tail model; beyond it the tail model,
     capped at the conformal 1 / (n_R + 1). Only this extrapolation rests on a model.
   * the p-value is never below the parametric one exp(−S): a conservative parametric null (the
     default defenders: logistic regression, torch MLP, DP-SGD) keeps its power unchanged.

   The Reserved samples' own p-values are cross-fitted (each half against the other half) so that
   the control stays out of sample. ``calibrate=False`` keeps the parametric p-values (with the
   positive-risk screen). ``null_location`` / ``null_scale`` (median and IQR/1.349 of the
   Reserved Student-t z-scores, Efron 2004) remain as diagnostics of the parametric null.
6. **Multiplicity.** Only Defender samples are tested for leakage (a Reserved sample was not
   trained on and can never be listed as leaked): Benjamini-Hochberg at FDR ``level`` over the
   n_D tested samples (or Bonferroni at family-wise ``level``); a flag needs a positive risk. The
   **empirical false-discovery check** applies the same p-value cutoff to the Reserved samples: the
   number they would have flagged estimates the false discoveries among the n_D Defender tests
   (``reserved_flagged × n_D / n_R``), like a target-decoy search; ``empirical_fdr`` is that
   estimate divided by the number flagged.

The per-sample frame (:meth:`SampleRisk.frame`) is merged into ``data/ltu/<defender>.scores.parquet``
and the summary (:meth:`SampleRisk.summary`) becomes ``metrics/ltu.json`` ``<defender>.sample_risk``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import special, stats

from privaudit.attacks.batched_mocks import MAX_MODELS
from privaudit.attacks.mia_lira import logit_conf
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.seeding import draw_seeds
from privaudit.stats.percentiles import nanpercentile_columns

#: columns added to the per-sample scores file (besides id, role, score)
RISK_COLUMNS: tuple[str, ...] = ("risk", "risk_low", "risk_high", "z", "p_value", "q_value", "flagged",
                                 "control_hit", "risk_level", "risk_correction", "risk_interval")

#: smallest per-sample variance of φ (φ units²): numerical guard only
VAR_FLOOR = 1e-4

#: confidences are clipped to [P_CLIP, 1 − P_CLIP] before φ (|φ| <= 9.2). Far from the decision
#: boundary φ is not Gaussian across models, and the released model and the reference models
#: differ most there (digits MLP: M_D's p_y reached 1 − 1e-12 on Reserved samples where no reference
#: model, IN or OUT, went beyond 1 − 1e-6; with a clip at 1e-15 its Reserved negative control got
#: 3 hits, with this clip none). Odds differences out there say nothing about memorisation, which
#: shows well inside the range (a memorised hard digit: φ ≈ 2 under M_D against ≈ −6 without it).
P_CLIP = 1e-4

#: variance of φ assumed for a group (a sample's IN or OUT models) of which at least half sit at
#: the clip: they agree to the clip's resolution, so their observed spread (~0) is replaced by
#: half a logit unit squared before moderation (a target at the other end of the range is then
#: significant, one within a logit or so of the clip is not)
VAR_CENSORED = 0.25
PHI_MAX = float(np.log((1 - P_CLIP) / P_CLIP))

#: the tail of the negative control's statistics (−log p) is fitted above its TAIL_FRACTION upper
#: quantile, on at least TAIL_MIN statistics (digits, 899 Reserved samples: the top 90)
TAIL_FRACTION = 0.1
TAIL_MIN = 10
#: a heavier-than-exponential (generalised Pareto, ξ > 0) tail is used when its likelihood ratio
#: against the exponential exceeds this: χ²₁ 90 % quantile, a one-sided 5 % test (ξ = 0 is a boundary)
TAIL_LR_CRITICAL = float(stats.chi2.ppf(0.90, 1))

METHOD = ("online LiRA: per-example Gaussian fits of phi = log(p/(1-p)) on IN/OUT reference models "
          "(moderated variances); p-value: one-sided Student-t predictive test against OUT, calibrated "
          "on the Reserved control (conformal, GPD tail beyond it; never below the Student-t p)")


@dataclass(frozen=True)
class RiskOptions:
    """Settings of :func:`sample_risk` (``ltu.risk_*`` params).

    Attributes:
        reference_models: K reference models (even: complementary pairs), >= 4 (``ltu`` stage: 32).
        level: FDR level (``bh``) or family-wise error level (``bonferroni``) of the flag.
        correction: ``bh`` (Benjamini-Hochberg) | ``bonferroni``, over the tested Defender samples.
        bootstrap: resamples of the reference models for the risk interval (0: no interval).
        interval: coverage of the bootstrap interval.
        calibrate: p-values against the Reserved negative control's statistics (conformal, with a
            fitted tail beyond the control; never below the parametric p-value). False: the
            parametric Student-t p-values.
        n_jobs / batched / max_models / device: how the reference models train
            (:func:`privaudit.attacks.mia_reference.train_subset_confidences`).
    """

    reference_models: int = 32
    level: float = 0.05
    correction: Literal["bh", "bonferroni"] = "bh"
    bootstrap: int = 200
    interval: float = 0.9
    calibrate: bool = True
    n_jobs: int | Literal["auto"] = "auto"
    batched: bool = True
    max_models: int = MAX_MODELS
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.reference_models < 4:
            raise ValueError(f"ltu.risk_reference_models must be >= 4, got {self.reference_models}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"ltu.risk_level must lie in (0, 1), got {self.level}")
        if self.correction not in ("bh", "bonferroni"):
            raise ValueError(f"ltu.risk_correction must be 'bh' or 'bonferroni', got {self.correction!r}")
        if self.bootstrap < 0 or not 0.0 < self.interval < 1.0:
            raise ValueError(f"bootstrap must be >= 0 and interval in (0, 1), got {self.bootstrap}, {self.interval}")


# --------------------------------------------------------------------------- multiplicity


def benjamini_hochberg(p: np.ndarray, *, level: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Benjamini-Hochberg step-up over the m p-values ``p``.

    Returns:
        (reject (m,) bool, q-values (m,) = BH-adjusted p-values, cutoff: the step-up threshold
        ``level · R / m`` that the R rejected p-values lie below (every p-value under it is
        rejected), or ``level / m`` (the first step) when nothing is rejected).
    """
    p = np.asarray(p, np.float64)
    m = len(p)
    if m == 0:
        return np.zeros(0, bool), np.zeros(0), float(level)
    order = np.argsort(p, kind="mergesort")
    ranked = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum.accumulate(ranked[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(q_sorted, 1.0)
    below = np.flatnonzero(p[order] <= level * np.arange(1, m + 1) / m)
    if len(below) == 0:
        return np.zeros(m, bool), q, float(level / m)
    cutoff = float(level * (below[-1] + 1) / m)
    return p <= cutoff, q, cutoff


def bonferroni(p: np.ndarray, *, level: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Bonferroni: reject p <= level / m; adjusted p = min(1, m p); cutoff level / m."""
    p = np.asarray(p, np.float64)
    m = max(len(p), 1)
    cutoff = float(level / m)
    return p <= cutoff, np.minimum(p * m, 1.0), cutoff


def correct(p: np.ndarray, *, level: float, method: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(reject, adjusted p, p-value cutoff) of ``bh`` or ``bonferroni`` at ``level``."""
    if method == "bh":
        return benjamini_hochberg(p, level=level)
    if method == "bonferroni":
        return bonferroni(p, level=level)
    raise ValueError(f"unknown correction {method!r}; allowed: 'bh', 'bonferroni'")


# --------------------------------------------------------------------------- reference models


def _stratified_take(rows: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``rows`` at random, every class in proportion (largest-remainder quotas)."""
    classes, counts = np.unique(y[rows], return_counts=True)
    exact = counts * size / len(rows)
    quota = np.floor(exact).astype(int)
    rest = size - int(quota.sum())
    if rest:
        frac = exact - quota + rng.random(len(classes)) * 1e-9  # random tie-break
        quota[np.argsort(-frac, kind="stable")[:rest]] += 1
    parts = [rng.choice(rows[y[rows] == c], q, replace=False) for c, q in zip(classes, quota) if q]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def population_subsets(y: np.ndarray, n_train: int, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``count`` class-stratified random subsets of ``n_train`` of the n rows (sorted).

    When 2·n_train <= n they come in complementary pairs of disjoint subsets (every row is IN
    for at most one model of a pair, for exactly one when n = 2·n_train), so each row is IN for
    about half of the models; otherwise the subsets are independent.
    """
    y = np.asarray(y)
    n = len(y)
    if not 1 <= n_train < n:
        raise ValueError(f"reference subsets need 1 <= n_train < n, got n_train={n_train}, n={n}")
    everything = np.arange(n)
    out: list[np.ndarray] = []
    while len(out) < count:
        a = _stratified_take(everything, y, n_train, rng)
        out.append(a)
        if 2 * n_train <= n:
            out.append(_stratified_take(np.setdiff1d(everything, a), y, n_train, rng))
    return out[:count]


def train_population_references(spec: DefenderSpecBase, n_classes: int, X: np.ndarray, y: np.ndarray, n_train: int,
                                options: RiskOptions, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """K reference models of T_D on population subsets of the Defender set's size.

    Returns:
        (conf (n, K) p_y(x) under each model, inside (n, K) bool: x in model k's training set).
    """
    from privaudit.attacks.mia_reference import train_subset_confidences

    subsets = population_subsets(y, n_train, options.reference_models, rng)
    seeds = draw_seeds(rng, len(subsets))
    return train_subset_confidences(spec, n_classes, X, y, subsets, seeds, options.n_jobs, batched=options.batched,
                                    max_models=options.max_models, device=options.device)


# --------------------------------------------------------------------------- statistics


def _moments(phi: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (count, mean, unbiased variance) of phi over the columns where mask is True."""
    m = mask.astype(np.float64)
    k = m.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = (phi * m).sum(axis=-1) / k
        # |φ| <= 9.2 (P_CLIP): the one-pass formula has no cancellation problem
        var = np.maximum(((phi * phi) * m).sum(axis=-1) - k * mu * mu, 0.0) / (k - 1)
    var = np.where(k >= 2, var, np.nan)
    return k, mu, var


def _trigamma_inverse(x: float) -> float:
    """y > 0 with trigamma(y) = x (Newton iteration of limma's ``trigammaInverse``)."""
    if x > 1e7:
        return 1.0 / np.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        dif = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += dif
        if -dif / y < 1e-8:
            break
    return y


def variance_prior(var: np.ndarray, df: np.ndarray) -> tuple[float, float]:
    """Prior (d0, s0²) of per-sample variances (Smyth 2004, method of moments on log s²).

    ``var`` (m,) sample variances with ``df`` (m,) degrees of freedom; d0 = inf when the
    variances are no more spread than sampling alone explains.
    """
    ok = np.isfinite(var) & (df >= 1)
    if ok.sum() < 3:
        s0 = float(np.nanmedian(var)) if np.isfinite(var).any() else 1.0
        return 0.0, max(s0, VAR_FLOOR)
    v, d = np.maximum(var[ok], VAR_FLOOR), df[ok]
    e = np.log(v) - special.digamma(d / 2) + np.log(d / 2)
    e_mean = float(e.mean())
    spread = float(((e - e_mean) ** 2).sum() / (len(e) - 1) - special.polygamma(1, d / 2).mean())
    if spread <= 0:
        return float("inf"), float(np.exp(e_mean))
    d0 = 2.0 * _trigamma_inverse(spread)
    s0 = float(np.exp(e_mean + special.digamma(d0 / 2) - np.log(d0 / 2)))
    return float(d0), s0


def moderate(var: np.ndarray, df: np.ndarray, d0: float, s0: float) -> np.ndarray:
    """Posterior variances (d0 s0² + df s²) / (d0 + df) (s0² where a sample has no variance)."""
    v = np.where(np.isfinite(var), np.maximum(var, VAR_FLOOR), s0)
    d = np.where(np.isfinite(var), df, 0.0)
    if np.isinf(d0):
        return np.full_like(v, s0)
    with np.errstate(invalid="ignore", divide="ignore"):
        post = (d0 * s0 + d * v) / (d0 + d)
    return np.where(d0 + d > 0, post, s0)


def _gauss_logpdf(x: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2 * np.pi * var) + (x - mu) ** 2 / var)


@dataclass(frozen=True)
class _Fit:
    """Per-sample Gaussian fits of the IN and OUT reference models."""

    k_in: np.ndarray
    mu_in: np.ndarray
    var_in: np.ndarray
    k_out: np.ndarray
    mu_out: np.ndarray
    var_out: np.ndarray
    df_out: np.ndarray


def _censored(phi: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Rows where at least half of the masked φ sit at the clip (saturated models)."""
    at_clip = np.abs(phi) >= PHI_MAX - 1e-9
    return (at_clip & mask).sum(axis=-1) * 2 >= np.maximum(mask.sum(axis=-1), 1)


def _fit(phi: np.ndarray, inside: np.ndarray, priors: tuple[tuple[float, float], tuple[float, float]] | None = None
         ) -> tuple[_Fit, tuple[tuple[float, float], tuple[float, float]]]:
    k_in, mu_in, v_in = _moments(phi, inside)
    k_out, mu_out, v_out = _moments(phi, ~inside)
    return _fit_moments((k_in, mu_in, v_in, _censored(phi, inside)), (k_out, mu_out, v_out, _censored(phi, ~inside)),
                        priors)


_Side = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _fit_moments(inn: _Side, out: _Side, priors: tuple[tuple[float, float], tuple[float, float]] | None = None
                 ) -> tuple[_Fit, tuple[tuple[float, float], tuple[float, float]]]:
    """:func:`_fit` from each side's (count, mean, variance, censored) per sample."""
    k_in, mu_in, v_in, censored_in = inn
    k_out, mu_out, v_out, censored_out = out
    v_in = np.where(censored_in, np.fmax(v_in, VAR_CENSORED), v_in)
    v_out = np.where(censored_out, np.fmax(v_out, VAR_CENSORED), v_out)
    if priors is None:
        priors = (variance_prior(v_in, k_in - 1), variance_prior(v_out, k_out - 1))
    (d0_in, s0_in), (d0_out, s0_out) = priors
    var_in = moderate(v_in, k_in - 1, d0_in, s0_in)
    var_out = moderate(v_out, k_out - 1, d0_out, s0_out)
    df_out = d0_out + np.where(np.isfinite(v_out), k_out - 1, 0.0)
    return _Fit(k_in, mu_in, var_in, k_out, mu_out, var_out, df_out), priors


def _llr(phi_t: np.ndarray, f: _Fit) -> np.ndarray:
    """Per-example LiRA log-likelihood ratio IN vs OUT (NaN without IN or OUT models)."""
    ok = (f.k_in >= 1) & (f.k_out >= 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        llr = _gauss_logpdf(phi_t, f.mu_in, f.var_in) - _gauss_logpdf(phi_t, f.mu_out, f.var_out)
    return np.where(ok, llr, np.nan)


def out_test(phi_t: np.ndarray, f: _Fit) -> tuple[np.ndarray, np.ndarray]:
    """(z, p): one-sided Student-t predictive test of φ_D against the OUT fit, z = Φ⁻¹(1 − p)."""
    k = np.maximum(f.k_out, 1.0)
    t = (phi_t - f.mu_out) / np.sqrt(f.var_out * (1.0 + 1.0 / k))
    df = np.where(np.isfinite(f.df_out), np.maximum(f.df_out, 0.5), np.inf)  # censored, weak prior: heavy tail
    logp = np.where(np.isinf(df), stats.norm.logsf(t), stats.t.logsf(t, np.where(np.isinf(df), 1.0, df)))
    logp = np.where(f.k_out >= 1, logp, 0.0)  # no OUT model: nothing to test, p = 1
    return -_norm_ppf_log(logp), np.exp(logp)


def _norm_ppf_log(logp: np.ndarray) -> np.ndarray:
    """Φ⁻¹(exp(logp)), accurate for tiny p (z = −Φ⁻¹(p) is the upper-tail z-score)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return special.ndtri_exp(np.minimum(logp, 0.0))


def _robust_null(z: np.ndarray) -> tuple[float, float]:
    """(median, IQR / 1.349) of finite z-scores; (0, 1) when fewer than 10 (a diagnostic only)."""
    z = z[np.isfinite(z)]
    if len(z) < 10:
        return 0.0, 1.0
    q25, q50, q75 = np.percentile(z, [25, 50, 75])
    return float(q50), float((q75 - q25) / 1.349)


@dataclass(frozen=True)
class NullTail:
    """Generalised Pareto fit of the control statistics above ``threshold`` (see :func:`fit_null_tail`).

    Attributes:
        n: control statistics. threshold: u, the (TAIL_MIN or TAIL_FRACTION·n)-th largest.
        above: control statistics > u (the tail's anchor, P(S > u) ≈ (1 + above) / (n + 1)).
        shape, scale: ξ >= 0 and σ of the GPD of S − u | S > u (ξ = 0: exponential).
        top: the largest control statistic (beyond it the tail extrapolates).
    """

    n: int
    threshold: float
    above: int
    shape: float
    scale: float
    top: float

    def sf(self, s: np.ndarray) -> np.ndarray:
        """(1 + above) / (n + 1) · GPD survival of s − u (s > u)."""
        y = np.maximum(np.asarray(s, np.float64) - self.threshold, 0.0) / self.scale
        with np.errstate(over="ignore", divide="ignore"):
            surv = np.exp(-y) if self.shape <= 0 else np.exp(-np.log1p(self.shape * y) / self.shape)
        return (1 + self.above) / (self.n + 1) * surv


def fit_null_tail(control: np.ndarray) -> NullTail | None:
    """Tail model of the control statistics S = −log p (Knijnenburg et al. 2009 for permutation tails).

    The threshold u is the k-th largest of the n statistics, k = max(:data:`TAIL_MIN`,
    ⌈:data:`TAIL_FRACTION`·n⌉); the exceedances S − u of the statistics above u get an exponential fit
    (maximum likelihood: σ = their mean, ξ = 0; exact when the parametric p-values are
    exact or off by a power) unless a generalised Pareto fit with ξ > 0 (heavier tail) is
    significantly better (likelihood ratio, one-sided 5 %: 2 Δℓ > χ²₁(0.90)). ``None`` when fewer than
    :data:`TAIL_MIN` + 1 statistics or fewer than 2 distinct exceedances (no extrapolation then).
    """
    c = np.sort(np.asarray(control, np.float64))[::-1]
    n = len(c)
    k = max(TAIL_MIN, int(np.ceil(TAIL_FRACTION * n)))
    if n < TAIL_MIN + 1:
        return None
    u = float(c[min(k, n) - 1])
    exc = c[c > u] - u
    if len(np.unique(exc)) < 2:
        return None
    scale, shape = float(exc.mean()), 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        xi, _, sc = stats.genpareto.fit(exc, floc=0.0)
    if np.isfinite(xi) and np.isfinite(sc) and xi > 0 and sc > 0:
        ll_gpd = float(stats.genpareto.logpdf(exc, xi, 0.0, sc).sum())
        ll_exp = float(stats.expon.logpdf(exc, 0.0, scale).sum())
        if 2.0 * (ll_gpd - ll_exp) > TAIL_LR_CRITICAL:
            shape, scale = float(xi), float(sc)
    return NullTail(n, u, len(exc), shape, scale, float(c[0]))


def control_p_values(stat: np.ndarray, control: np.ndarray) -> tuple[np.ndarray, NullTail | None]:
    """p-values of the statistics ``stat`` (S = −log of the parametric p-value; larger is more extreme)
    against the negative control's statistics ``control``, drawn under H0.

    * conformal p-value (1 + #{control >= s}) / (n + 1) (Bates et al. 2023, Eq. (2)) where the control
      reaches s: exact under exchangeability with the control, whatever the parametric model;
      identical statistics get identical p-values, and a statistic tied with the control's largest
      values gets at least (1 + ties) / (n + 1);
    * above the threshold of the tail fit (:func:`fit_null_tail`) the larger of that and the fitted
      tail; beyond the control's largest statistic the fitted tail, at most the conformal 1 / (n + 1)
      (the only part that extrapolates, as for permutation p-values, Knijnenburg et al. 2009);
    * never below the parametric p-value exp(−s): a conservative parametric null is never made
      more liberal.

    Returns:
        (p-values in (0, 1], the tail fit or None).
    """
    s = np.asarray(stat, np.float64)
    c = np.sort(np.asarray(control, np.float64))
    n = len(c)
    tol = 1e-9 * np.maximum(1.0, np.abs(s))  # floating-point noise counts as a tie
    ge = n - np.searchsorted(c, s - tol, side="left")  # #{control >= s}
    p = (1.0 + ge) / (n + 1.0)
    tail = fit_null_tail(c)
    if tail is not None:
        t = tail.sf(s)
        # up to the control's top: never below the conformal p-value; beyond it the fitted tail,
        # at most the conformal 1 / (n + 1)
        p = np.where(s <= tail.threshold, p, np.where(s <= tail.top + tol, np.maximum(p, t), np.minimum(p, t)))
    with np.errstate(over="ignore"):
        p = np.maximum(p, np.exp(-s))
    return np.clip(p, np.finfo(np.float64).tiny, 1.0), tail


# --------------------------------------------------------------------------- result


@dataclass
class SampleRisk:
    """Per-sample risk of one defender (arrays in data row order) and its summary.

    Attributes:
        risk: (n,) LiRA log-likelihood ratio IN vs OUT of M_D's φ(x); risk_low / risk_high its
            bootstrap interval over reference models.
        z, p_value: (n,) calibrated one-sided p-value of the OUT test (against the Reserved
            statistics; Reserved: cross-fitted; 1 where the risk is not positive) and its z-score
            Φ⁻¹(1 − p).
        q_value: (n,) adjusted p-values (Defender: over the Defender tests; Reserved: over the
            Reserved tests, the negative control's own correction).
        flagged: (n,) Defender samples with positive risk, significant after correction (never a
            Reserved sample).
        control_hit: (n,) Reserved samples that the same cutoff would have flagged.
        info: the summary (see :meth:`summary`).
    """

    risk: np.ndarray
    risk_low: np.ndarray
    risk_high: np.ndarray
    z: np.ndarray
    p_value: np.ndarray
    q_value: np.ndarray
    flagged: np.ndarray
    control_hit: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def frame(self, ids: np.ndarray, is_defender: np.ndarray) -> pd.DataFrame:
        """Per-sample table (id + :data:`RISK_COLUMNS`), Defender rows first (as the scores file)."""
        d = np.asarray(is_defender, bool)
        order = np.concatenate([np.flatnonzero(d), np.flatnonzero(~d)])
        return pd.DataFrame({
            "id": np.asarray(ids)[order],
            "risk": self.risk[order], "risk_low": self.risk_low[order], "risk_high": self.risk_high[order],
            "z": self.z[order], "p_value": self.p_value[order], "q_value": self.q_value[order],
            "flagged": self.flagged[order], "control_hit": self.control_hit[order],
            "risk_level": float(self.info["level"]), "risk_correction": str(self.info["correction"]),
            "risk_interval": np.nan if self.info.get("interval") is None else float(self.info["interval"]),
        })

    def summary(self) -> dict[str, Any]:
        """The ``metrics/ltu.json`` ``sample_risk`` block (documented in docs/concepts/membership.md)."""
        return dict(self.info)


def risk_from_confidences(conf_target: np.ndarray, conf_ref: np.ndarray, inside: np.ndarray, is_defender: np.ndarray,
                          options: RiskOptions | None = None, rng: np.random.Generator | None = None) -> SampleRisk:
    """Per-sample risk from M_D's and the reference models' label confidences (no training).

    Args:
        conf_target: (n,) p_y(x) under M_D. conf_ref: (n, K) p_y(x) under the reference models.
        inside: (n, K) bool, x in reference model k's training set.
        is_defender: (n,) bool, x in M_D's training set (the tested samples); the others are the
            negative control (never flagged).
        options: level, correction, bootstrap, calibration. rng: bootstrap randomness.
    """
    options = options or RiskOptions()
    rng = rng if rng is not None else np.random.default_rng(0)
    d = np.asarray(is_defender, bool)
    phi_t = logit_conf(np.clip(np.asarray(conf_target, np.float64), P_CLIP, 1 - P_CLIP))
    phi = logit_conf(np.clip(np.asarray(conf_ref, np.float64), P_CLIP, 1 - P_CLIP))
    inside = np.asarray(inside, bool)
    if phi.shape != inside.shape or phi.shape[0] != len(phi_t) or len(d) != len(phi_t):
        raise ValueError(f"shapes differ: target {phi_t.shape}, reference {phi.shape}, inside {inside.shape}, "
                         f"is_defender {d.shape}")
    if d.sum() < 1 or (~d).sum() < 2:
        raise ValueError("per-sample risk needs Defender samples to test and >= 2 Reserved samples as the control")
    fit, priors = _fit(phi, inside)
    risk = _llr(phi_t, fit)
    z_raw, p_raw = out_test(phi_t, fit)
    # the statistic: −log of the parametric p-value, 0 (p = 1) unless M_D looks IN-like (risk > 0)
    with np.errstate(divide="ignore"):
        stat = np.where(risk > 0, -np.log(np.maximum(p_raw, np.finfo(np.float64).tiny)), 0.0)

    # calibration on the negative control (Reserved, never trained on by M_D)
    res = np.flatnonzero(~d)
    loc, scale = _robust_null(z_raw[res])
    p = np.exp(-stat)
    tail: NullTail | None = None
    if options.calibrate:
        p[d], tail = control_p_values(stat[d], stat[res])
        # the control itself cross-fitted: each half against the other half (out of sample)
        halves = np.array_split(rng.permutation(res), 2)
        for own, other in ((halves[0], halves[1]), (halves[1], halves[0])):
            p[own], _ = control_p_values(stat[own], stat[other])
    z = -_norm_ppf_log(np.log(p))

    flagged = np.zeros(len(d), bool)
    q = np.full(len(d), np.nan)
    reject, q_d, cutoff = correct(p[d], level=options.level, method=options.correction)
    reject &= risk[d] > 0  # already p = 1 otherwise: a flag always has a positive risk
    flagged[d], q[d] = reject, q_d
    ctrl_reject, q_r, _ = correct(p[~d], level=options.level, method=options.correction)
    q[~d] = q_r
    control_hit = np.zeros(len(d), bool)
    control_hit[~d] = p[~d] <= cutoff

    low, high = _bootstrap(phi_t, phi, inside, priors, options, rng)
    n_d, n_r = int(d.sum()), int((~d).sum())
    n_flag, n_ctrl = int(reject.sum()), int(control_hit.sum())
    expected_false = n_ctrl * n_d / n_r
    info: dict[str, Any] = {
        "method": METHOD,
        "reference_models": int(inside.shape[1]),
        "reference_in_per_sample": float(fit.k_in.mean()),
        "correction": options.correction,
        "level": float(options.level),
        "tested": n_d,
        "flagged": n_flag,
        "p_cutoff": float(cutoff),
        "reserved_tested": n_r,
        "reserved_flagged": n_ctrl,
        "reserved_flagged_own_correction": int(ctrl_reject.sum()),
        "expected_false_flags": float(expected_false),
        "empirical_fdr": float(min(1.0, expected_false / n_flag)) if n_flag else None,
        "reserved_share_p_below_level": float(np.mean(p[~d] <= options.level)),
        "calibrated": bool(options.calibrate),
        "null_location": loc,
        "null_scale": scale,
        "null_tail_shape": None if tail is None else tail.shape,
        "null_tail_scale": None if tail is None else tail.scale,
        "prior_df_out": None if not np.isfinite(priors[1][0]) else float(priors[1][0]),
        "interval": float(options.interval) if options.bootstrap else None,
        "bootstrap": int(options.bootstrap),
    }
    return SampleRisk(risk, low, high, z, p, q, flagged, control_hit, info)


#: rows of one block of the bootstrap: its (resamples, rows) arrays stay in cache
BOOTSTRAP_ROWS = 1024


def _column_sums(x_t: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(B, rows) sums over the columns ``cols[b]`` of the (rows, K) array whose transpose is ``x_t`` (K, rows),
    added left to right in the order of ``cols[b]`` — the order in which numpy sums the column-major array that
    ``x[:, cols[b]]`` makes, so the same floating-point numbers."""
    acc = x_t[cols[:, 0]]
    part = np.empty_like(acc)
    for j in range(1, cols.shape[1]):
        np.take(x_t, cols[:, j], axis=0, out=part)
        acc += part
    return acc


def _bootstrap(phi_t: np.ndarray, phi: np.ndarray, inside: np.ndarray,
               priors: tuple[tuple[float, float], tuple[float, float]], options: RiskOptions,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the risk over reference models resampled with replacement.

    Resample b refits every sample on the columns ``cols_b`` (``rng.integers(0, K, K)``, drawn in order) with the
    prior of the full fit: :func:`_fit` on ``phi[:, cols_b]``. Computed here in blocks of rows for all resamples
    at once, with the same numbers: the sums of φ and φ² over the gathered columns are added in the same order
    (:func:`_column_sums`), the counts (IN models, models at the clip) are products with each column's
    multiplicity (whole numbers: exact in any order). At 50 000 samples x 32 models x 200 resamples this takes
    3.1 s instead of 11.2 s on 2 CPU cores (``benchmarks/bench_ltu_scoring.py``); ``tests/attacks/
    test_sample_risk_bootstrap.py`` compares it bit for bit with a fit per resample
    (:func:`privaudit.testing.scoring_reference.risk_bootstrap_per_resample`).
    """
    n, K = phi.shape
    if options.bootstrap == 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    cols = np.stack([rng.integers(0, K, K) for _ in range(options.bootstrap)])  # (B, K)
    times = np.stack([np.bincount(c, minlength=K) for c in cols], axis=1).astype(np.float64)  # (K, B)
    m_in, m_out = inside.astype(np.float64), (~inside).astype(np.float64)
    at_clip = np.abs(phi) >= PHI_MAX - 1e-9
    draws = np.empty((options.bootstrap, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, n, BOOTSTRAP_ROWS):
            sl = slice(start, min(n, start + BOOTSTRAP_ROWS))
            p = phi[sl]
            sides = []
            for m in (m_in[sl], m_out[sl]):
                k = times.T @ m.T  # (B, rows) models on this side in each resample
                mu = _column_sums(np.ascontiguousarray((p * m).T), cols) / k
                var = np.maximum(_column_sums(np.ascontiguousarray(((p * p) * m).T), cols) - k * mu * mu, 0.0) / (k - 1)
                clipped = times.T @ (at_clip[sl] & (m > 0)).T.astype(np.float64)
                sides.append((k, mu, np.where(k >= 2, var, np.nan), clipped * 2 >= np.maximum(k, 1)))
            f, _ = _fit_moments(sides[0], sides[1], priors)
            draws[:, sl] = _llr(phi_t[None, sl], f)
    a = (1.0 - options.interval) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a sample without IN or OUT draws
        lo, hi = nanpercentile_columns(draws, [100 * a, 100 * (1 - a)])
    return lo, hi


def sample_risk(data: Any, rng: np.random.Generator, options: RiskOptions | None = None) -> SampleRisk:
    """Per-sample risk of one defender (:class:`privaudit.attacks.ltu.LtuData`, rows in data order).

    Trains ``options.reference_models`` reference models of ``data.spec`` on population subsets of
    the Defender set's size (:func:`train_population_references`), then
    :func:`risk_from_confidences`.

    Raises:
        ValueError: no spec or no features (black-box data), or too few samples.
    """
    options = options or RiskOptions()
    if data.spec is None or data.X.shape[1] == 0:
        raise ValueError("per-sample risk needs the defender spec and the features (reference models)")
    conf_ref, inside = train_population_references(data.spec, data.n_classes, data.X, data.y,
                                                   int(np.sum(data.is_defender)), options, rng)
    conf_t = data.proba[np.arange(len(data.y)), data.y]
    return risk_from_confidences(conf_t, conf_ref, inside, data.is_defender, options, rng)
