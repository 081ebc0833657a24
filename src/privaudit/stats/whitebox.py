"""White-box DP-SGD audit: confidence bounds on the mechanism a training run actually executed.

Threat model: white-box, every intermediate update visible (DP's own threat model, the one of
Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", USENIX Security
2023, arXiv:2302.07956, which shows that an adversary who sees all model updates can audit
DP-SGD tightly from two training runs).  :mod:`privaudit.hooks` observes opacus's
``DPOptimizer`` at every step and records, per step t:

* ``B_t``  the number of per-example gradient rows the optimizer clipped (the batch size);
* ``Δ_t``  the L2 change of the clipped sum when one gradient canary of norm ``M·C`` is added
  (a *gradient* canary as in Nasr et al., whose "Dirac canary" is a gradient that is zero except
  at one coordinate; here the direction is uniformly random on the sphere, the random-canary
  design of Andrew et al. 2024, "One-shot Empirical Privacy Estimation for Federated Learning",
  ICLR 2024, arXiv:2302.03098).  ``Δ_t = C`` when clipping works, ``M·C`` when it is skipped;
* ``N_t``  the noise the optimizer added (``p.grad − p.summed_grad`` after ``add_noise``),
  summarised by ``‖N_t‖²``, ``Σ_j N_tj⁴``, ``cos(N_{t−1}, N_t)`` and per-coordinate ``Σ_t N_tj²``.

Unlike a distinguishing game (Nasr et al. 2023; the one-run game of Steinke, Nasr & Jagielski
2023, "Privacy Auditing with One (1) Training Run", NeurIPS 2023, see
:mod:`privaudit.stats.one_run`), the observations here estimate the *parameters* of the
mechanism and feed them to the accountant (model-based).  Modelling assumption (stated verbatim
in every result)::

    each step is a Poisson-subsampled Gaussian mechanism: noise i.i.d. N(0, s²) per coordinate,
    independent across steps, the same s at every step, sensitivity Δ = max_t Δ_t, Poisson
    sampling at rate q; the run is the T-fold composition, accounted by opacus's <accountant>

Estimate.  ``ε̂ = PRV_lower(z, q_L, δ)``: the certified lower end of the PRV accountant (Gopi, Lee &
Wutschitz 2021, :func:`~privaudit.stats.accounting.compose_epsilon_lower`) on the composition of
the observed steps, where, with ``n`` the true data-set size,

1. ``s_U``: upper confidence bound on s from ``Σ_t ‖N_t‖² / s² ~ χ²_{T·d}`` (pooled over runs);
   with declared per-step scales ``r_t = σ_t·C_t`` (noise / clip schedules) the bound is on κ from
   ``Σ_t ‖N_t‖² / (κ r_t)² ~ χ²_{T·d}`` and step t's noise is ``κ_U·r_t`` (:data:`ASSUMPTION_SCALED`);
2. ``q_L``: Clopper-Pearson lower bound from ``Σ_t B_t ~ Binomial(n·T, q)``;
3. ``z``: ``s_U / max_t Δ_t`` for every step (one s), or per step ``κ_U r_t / Δ_t`` (each step's
   noise paired with the sensitivity measured at that step; z rounded UP to a 0.1 % grid), Δ_t a
   lower bound on the add/remove sensitivity of the clipped sum;
4. each run's own steps are composed; ε̂ is the smallest over runs (one released run).

Guarantee.  If the model holds, then with probability ≥ 1 − ``level`` over the audit runs,
``s_U ≥ s`` (``κ_U ≥ κ``) and ``q_L ≤ q``; the ε of a composition of subsampled Gaussians is
decreasing in every z_t and increasing in q and the number of steps, so ε̂ ≤ the TRUE ε of the
mechanism the code really runs (true sensitivity ``Δ* ≥ Δ``): the PRV lower end and the exact
one-step ε (:func:`subsampled_gaussian_one_step_epsilon`, the fallback when the PRV grid would need
more than ``PRV_MAX_POINTS`` points or it raises) both lower-bound the true ε.  A claim below ε̂
is therefore not backed by any sound accountant (RDP, PRV, PLD all state at least the true ε;
'gdp' is a CLT approximation that opacus warns can under-estimate, so a GDP claim can be refuted).
The claim's ``accountant`` only gives the point estimate ``epsilon_point``.

Model checks (each a test at its own share of ``level``; a failed check fails the recipe):

* ``noise_homogeneity_steps`` — per step ``F_t = (‖N_t‖²/d) / (rest/((T−1)d)) ~ F(d, (T−1)d)``,
  lower tail, Bonferroni over steps (noise added once per epoch).  On rejection, per-step upper
  bounds ``s_t,U`` (χ²_d at share/T each) are composed step by step (rounded up to a 2 % grid):
  a step without noise gives ε̂ = ∞.
* ``noise_homogeneity_coordinates`` — per coordinate ``F_j ~ F(T, (d−1)T)``, lower tail, Bonferroni
  over coordinates (noise missing on some parameters).  On rejection ``z = min_j s_j,U / Δ``
  (the worst direction of a diagonal-covariance Gaussian; an adversary that controls a gradient
  can point it there, as gradient canaries do).
* ``noise_independence`` — ``cos(N_{t−1}, N_t)``: for independent isotropic noise
  ``cos² ~ Beta(1/2, (d−1)/2)`` exactly (an exact version of the ``|cos|·√d ≈ N(0, 1)`` rule),
  two-sided, Bonferroni over pairs (one noise draw reused).  On rejection ε̂ = ∞: subtracting
  consecutive updates cancels the shared noise, so the accountant's bound does not apply.
* ``noise_gaussianity`` — per step ``r_t = Σ_j N_tj⁴ / ‖N_t‖⁴`` has, for Gaussian noise, mean
  ``3/(d+2)`` and variance ``(9d+96)/((d+2)(d+4)(d+6)) − 9/(d+2)²`` exactly (scale-free, so a
  step-varying s does not matter); the mean over steps is compared two-sided with a normal
  approximation (Laplace noise of the same variance, uniform noise).
* ``poisson_sampling`` — two tests Bonferroni-combined: the dispersion index
  ``Σ_t (B_t − n q̂)² / (n q̂ (1 − q̂))``, two-sided against a moment-matched χ²_{T−1}
  (binomial kurtosis), and the *mode concentration* ``m = max_v #{t: B_t = v}`` with
  ``P(m ≥ k) ≤ C(T, k) p_max^{k−1}`` where ``p_max`` is the largest Binomial(n, q') point mass
  over q' in a Clopper-Pearson interval (fixed-size shuffled batches repeat one size; their
  dispersion is ~0 when the batch size divides n but can be ≥ 1 when the last batch is ragged,
  which a lower-tail dispersion test alone misses).  A failure does not change ε̂: it means the
  batches are not Poisson-sampled and the accountant's amplification does not apply.
* ``sensitivity_observed`` — every measured ``Δ_t`` is finite and the largest is > 0 (the
  canary reached the clipped sum); otherwise ε̂ = ∞ (nothing is certified).

Error budget (Bonferroni, documented): ``level`` is split equally over the nine families
``LEVEL_SHARES``: the two bounds (s_U, q_L), the two fallback bounds (per-step, per-coordinate)
and the five tests above.  For a correct recipe the probability that the audit reports
``ε̂ > ε_claim`` or a failed check is therefore ≤ ``level`` (up to the normal/moment-matched
approximations of the gaussianity and dispersion tests, which tests/whitebox calibrate by
simulation).

Violations, and what happens (tests/whitebox/test_estimator.py):

* heterogeneous s across steps or coordinates: the pooled s² is the mean variance and the
  composition of Gaussians with varying σ_t is less private than with their mean variance (Jensen
  on Σ 1/σ_t²), so the pooled ε̂ stays below the true ε; the homogeneity tests add power;
* Laplace (or uniform) noise of the same variance: the χ² bound on s assumes Gaussian
  fourth moments, so s_U's coverage degrades; the gaussianity test rejects (kurtosis 6 or 1.8
  vs 3).  Such noise is *less* private for an L2-bounded change in d dimensions, so ε̂ does not
  overclaim either;
* what happens after ``add_noise`` (``scale_grad``, the base optimizer) is not observed; it is
  post-processing only if it does not use the data (dividing by the realised batch size is not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from ._checks import check_int, check_positive, check_prob
from .accounting import ACCOUNTANTS as _ACCOUNTANTS
from .accounting import PRV_MAX_POINTS, compose_epsilon, compose_epsilon_lower, subsampled_gaussian_one_step_epsilon
from .observations import RunObservations

__all__ = [
    "ASSUMPTION",
    "LEVEL_SHARES",
    "PRV_MAX_POINTS",
    "RunObservations",
    "WhiteboxCheck",
    "WhiteboxBounds",
    "WhiteboxResult",
    "whitebox_bounds",
    "estimate_whitebox",
    "compose_epsilon",
    "compose_epsilon_lower",
    "subsampled_gaussian_one_step_epsilon",
]


ASSUMPTION = (
    "each step is a Poisson-subsampled Gaussian mechanism: noise i.i.d. N(0, s²) per coordinate, "
    "independent across steps, the same s at every step, sensitivity Δ = max_t Δ_t, Poisson "
    "sampling at rate q; the run is the T-fold composition; ε̂ is a certified lower bound (PRV "
    "accountant, lower end) on its true ε, the point estimate is opacus's {accountant}"
)
#: the model when the optimizer declared its per-step noise scale (noise / clip schedules)
ASSUMPTION_SCALED = (
    "each step t is a Poisson-subsampled Gaussian mechanism: noise i.i.d. N(0, (κ σ_t C_t)²) per "
    "coordinate with σ_t C_t the optimizer's declared noise scale at step t and one unknown κ, "
    "independent across steps, sensitivity Δ_t measured at step t, Poisson sampling at rate q; the run "
    "is the composition of its steps; ε̂ is a certified lower bound (PRV accountant, lower end) on "
    "the true ε of that composition, the point estimate is opacus's {accountant}"
)

#: the families that share ``level`` equally (Bonferroni)
LEVEL_SHARES = (
    "noise_std_upper",
    "sample_rate_lower",
    "noise_homogeneity_steps",
    "per_step_fallback",
    "noise_homogeneity_coordinates",
    "per_coordinate_fallback",
    "noise_independence",
    "noise_gaussianity",
    "poisson_sampling",
)


_GRID = 1.02  # per-step fallback: noise bounds rounded up to powers of this ratio


@dataclass(frozen=True)
class WhiteboxCheck:
    """One model check: its statistic, (Bonferroni-adjusted) p-value, level share and verdict."""

    name: str
    statistic: float
    p_value: float
    #: the check's test size: its share of the total ``level`` (0 for the deterministic checks)
    level: float
    passed: bool
    detail: str


@dataclass(frozen=True)
class WhiteboxBounds:
    """The confidence bounds and checks, before accounting (see :func:`whitebox_bounds`)."""

    noise_std_upper: float
    noise_std_point: float
    sensitivity: float
    sensitivity_min: float
    sample_rate_lower: float
    sample_rate_point: float
    steps: int
    total_steps: int
    runs: int
    dimension: int
    dataset_size: int
    level: float
    checks: tuple[WhiteboxCheck, ...]
    per_step_noise_upper: tuple[NDArray[np.float64], ...] | None
    per_coordinate_noise_upper: float | None
    correlated_noise: bool
    no_noise: bool
    #: per-step noise shapes were declared (σ_t·C_t) and the bounds are on κ = s_t / (σ_t·C_t);
    #: then ``noise_std_upper``/``_point`` are κ times the smallest declared scale (s_U, ŝ when constant)
    scaled: bool = False
    scale_upper: float | None = None
    scale_point: float | None = None
    #: the scaled model's per-coordinate fallback: min_j upper bound on κ_j (``None`` when not needed)
    per_coordinate_scale_upper: float | None = None

    def check(self, name: str) -> WhiteboxCheck:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise ValueError(f"no check named {name!r}; checks are {[c.name for c in self.checks]}")


@dataclass(frozen=True)
class WhiteboxResult:
    """A white-box audit of DP-SGD (see the module docstring for the exact guarantee).

    ``epsilon`` is the lower confidence bound ε̂ (``inf`` when the audit shows the accountant's
    bound does not apply: no noise, correlated noise, a noiseless step or coordinate, no measurable
    sensitivity); ``epsilon_point`` is the accountant at the point estimates (ŝ/Δ, q̂).
    """

    epsilon: float
    delta: float
    epsilon_point: float
    noise_multiplier: float
    noise_multiplier_point: float
    noise_std_upper: float
    noise_std_point: float
    sensitivity: float
    sensitivity_min: float
    sample_rate_lower: float
    sample_rate_point: float
    steps: int
    total_steps: int
    runs: int
    dimension: int
    dataset_size: int
    accountant: str
    level: float
    checks: tuple[WhiteboxCheck, ...]
    bound_source: str
    epsilon_method: str
    reasons: tuple[str, ...]
    canary_scale: float | None = None
    declared_noise_multiplier: float | None = None
    notes: tuple[str, ...] = ()
    neighbourhood: str = "add_remove"
    threat_model: str = "white-box: every intermediate update visible"
    assumption: str = field(default="")

    @property
    def checks_passed(self) -> bool:
        """True when every model check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Names of the failed checks."""
        return tuple(c.name for c in self.checks if not c.passed)

    def overclaims(self, epsilon: float) -> bool:
        """True when a claimed ``epsilon`` is refuted: ε̂ > epsilon or a model check failed."""
        return bool(self.epsilon > float(epsilon) or not self.checks_passed)


# --------------------------------------------------------------------------------------------
# bounds and checks


def _smallest_variance_share(v: NDArray[np.float64], k: int) -> tuple[int, float, float]:
    """The group whose noise variance is smallest against the others, and its Bonferroni p-value.

    Under the model each ``v_i`` (i = 1..m) is a sum of k squared N(0, s²) draws with one s, so
    ``F_i = (v_i / k) / ((Σ v − v_i) / ((m − 1) k)) ~ F(k, (m − 1) k)`` (ratio of independent χ²
    over their degrees of freedom). Returns ``(i, F_i, min(1, m · P[F ≤ F_i]))`` for the i with the
    smallest one-sided p-value: a test, across the m groups (steps or coordinates), that no group
    got less noise than the rest.
    """
    m = v.size
    rest = (float(v.sum()) - v) / ((m - 1) * k)
    with np.errstate(divide="ignore", invalid="ignore"):
        F = np.where(rest > 0, (v / k) / np.where(rest > 0, rest, 1.0), np.inf)
    p_each = stats.f.cdf(F, k, (m - 1) * k)
    i = int(np.argmin(p_each))
    return i, float(F[i]), float(min(1.0, m * p_each[i]))


def _poisson_check(rows: NDArray[np.int64], n: int, level: float) -> WhiteboxCheck:
    T = rows.size
    name = "poisson_sampling"
    if np.any(rows > n):
        return WhiteboxCheck(name, math.inf, 0.0, level, False,
                             f"a batch has {int(rows.max())} rows > dataset_size={n}: not a subsample of the data set")
    if T < 2:
        return WhiteboxCheck(name, math.nan, 1.0, level, True, "one step: not testable")
    total = int(rows.sum())
    qh = total / (n * T)
    if qh <= 0.0 or qh >= 1.0:
        ok = qh == 0.0 or bool(np.all(rows == n))
        return WhiteboxCheck(name, 0.0, 1.0 if ok else 0.0, level, ok,
                             f"q̂ = {qh:g}: every batch is {'empty' if qh == 0 else 'the whole data set'}")
    var = n * qh * (1 - qh)
    disp = float(((rows - n * qh) ** 2).sum() / var)
    kappa = (1 - 6 * qh * (1 - qh)) / var  # excess kurtosis of Binomial(n, q)
    c = max(1.0 + kappa / 2.0, 1e-3)
    k = (T - 1) / c
    p_disp = float(min(1.0, 2 * min(stats.chi2.cdf(disp / c, k), stats.chi2.sf(disp / c, k))))
    # mode concentration: P(max_v count_v >= m) <= C(T, m) p_max^(m-1)
    _, counts = np.unique(rows, return_counts=True)
    m = int(counts.max())
    lo = float(stats.beta.ppf(level / 4, total, n * T - total + 1))
    hi = float(stats.beta.ppf(1 - level / 4, total + 1, n * T - total))
    p_max = 0.0
    for qq in (lo, qh, hi):
        if 0 < qq < 1:
            mode = min(n, int(math.floor((n + 1) * qq)))
            p_max = max(p_max, float(stats.binom.pmf([max(mode - 1, 0), mode], n, qq).max()))
    p_max = min(max(p_max, 1e-300), 1.0)
    log_b = special.gammaln(T + 1) - special.gammaln(m + 1) - special.gammaln(T - m + 1) + (m - 1) * math.log(p_max)
    p_mode = float(min(1.0, math.exp(min(log_b, 0.0))))
    p = min(1.0, 2 * min(p_disp, p_mode))
    passed = p > level
    detail = (f"dispersion {disp / (T - 1):.3g} (1 for Poisson), most frequent batch size in {m}/{T} steps "
              f"(Poisson: ≈ {T * p_max:.3g} at the mode)")
    if not passed:
        detail = "batches are not Poisson-sampled, the accountant's amplification does not apply: " + detail
    return WhiteboxCheck(name, disp / (T - 1), p, level, passed, detail)


def whitebox_bounds(runs: Sequence[RunObservations], *, dataset_size: int, level: float) -> WhiteboxBounds:
    """Confidence bounds (s_U, q_L, Δ) and model checks from pooled :class:`RunObservations`.

    Args:
        runs: observations of one or more audit runs of the same recipe (pooled: more steps).
        dataset_size: the TRUE number n of training rows (from the caller, never from the trainer).
        level: total failure probability, split equally over :data:`LEVEL_SHARES`.

    Returns:
        :class:`WhiteboxBounds`; with probability ≥ 1 − 2·level/9 (under the model) ``s_U ≥ s``
        and ``q_L ≤ q``; each check rejects a correct recipe with probability ≤ its own
        :attr:`WhiteboxCheck.level` (a share of ``level``).

    >>> rng = np.random.default_rng(0)
    >>> obs = RunObservations.from_noise(2.0 * rng.standard_normal((200, 50)), rng.binomial(100, 0.1, 200), 1.0)
    >>> b = whitebox_bounds([obs], dataset_size=100, level=0.05)
    >>> 2.0 < b.noise_std_upper < 2.05, b.sample_rate_lower < 0.1, all(c.passed for c in b.checks)
    (True, True, True)
    """
    runs = list(runs)
    if not runs or not all(isinstance(r, RunObservations) for r in runs):
        raise ValueError("runs must be a non-empty sequence of RunObservations (one per audit run)")
    n = check_int("dataset_size", dataset_size, minimum=1)
    level = check_prob("level", level, open_low=True, open_high=True)
    d = runs[0].dimension
    if any(r.dimension != d for r in runs):
        raise ValueError(f"all runs must observe the same number of noise coordinates, got {[r.dimension for r in runs]}")
    a = level / len(LEVEL_SHARES)
    rows = np.concatenate([r.batch_rows for r in runs])
    sens = np.concatenate([r.sensitivity for r in runs])
    nsq = np.concatenate([r.noise_sq for r in runs])
    quart = np.concatenate([r.noise_quartic for r in runs])
    cos = np.concatenate([r.noise_cos for r in runs])
    coord = np.sum([r.coord_sq for r in runs], axis=0)
    # the declared per-step shape σ_t·C_t (noise and clip schedules): the model that holds is
    # N_t ~ N(0, κ² (σ_t C_t)² I) with ONE unknown κ, so the bounds and the homogeneity tests are
    # on N_t / (σ_t C_t); without a shape, on N_t itself (one s for every step)
    scaled = all(r.noise_scale is not None and r.coord_sq_scaled is not None and bool(np.all(r.noise_scale > 0))
                 for r in runs)
    if scaled:
        shape = np.concatenate([r.noise_scale for r in runs])
        nsq_model = nsq / (shape * shape)
        coord_model = np.sum([r.coord_sq_scaled for r in runs], axis=0)
    else:
        nsq_model, coord_model = nsq, coord
    T_tot = int(rows.size)
    T = min(r.steps for r in runs)
    S2 = float(nsq_model.sum())
    no_noise = float(nsq.sum()) <= 0.0
    checks: list[WhiteboxCheck] = []

    # (1) s upper bound, pooled chi-square
    N_dof = T_tot * d
    s_point = math.sqrt(S2 / N_dof)
    s_upper = math.sqrt(S2 / float(stats.chi2.ppf(a, N_dof)))

    # (5) q lower bound, Clopper-Pearson on sum B_t ~ Binomial(n T, q)
    total = int(min(rows.sum(), n * T_tot))
    q_point = total / (n * T_tot)
    q_lower = 0.0 if total == 0 else float(stats.beta.ppf(a, total, n * T_tot - total + 1))

    # sensitivity
    finite = sens[np.isfinite(sens)]
    delta_max = float(finite.max()) if finite.size else math.nan
    delta_min = float(finite.min()) if finite.size else math.nan
    sens_ok = finite.size == sens.size and delta_max > 0
    checks.append(WhiteboxCheck(
        "sensitivity_observed", delta_max, math.nan, 0.0, bool(sens_ok),
        f"Δ_t in [{delta_min:.6g}, {delta_max:.6g}] over {finite.size}/{sens.size} measured steps" if sens_ok else
        f"the canary's effect on the clipped sum was not measurable at {sens.size - finite.size} of {sens.size} "
        f"steps (max Δ_t = {delta_max}): the sensitivity is unknown"))

    per_step: tuple[NDArray[np.float64], ...] | None = None
    per_coord: float | None = None
    correlated = False
    if no_noise:
        for nm in ("noise_homogeneity_steps", "noise_homogeneity_coordinates", "noise_independence",
                   "noise_gaussianity"):
            checks.append(WhiteboxCheck(nm, math.nan, math.nan, a, False,
                                        "not computable: the optimizer added no noise at any step"))
    else:
        # (2) homogeneity across steps
        name = "noise_homogeneity_steps"
        if T_tot < 2:
            checks.append(WhiteboxCheck(name, math.nan, 1.0, a, True, "one step: not testable"))
        else:
            i, F_i, p = _smallest_variance_share(nsq_model, d)
            ok = p > a
            checks.append(WhiteboxCheck(name, F_i, p, a, ok,
                f"smallest step noise / pooled = {F_i:.3g} (step {i})" if ok else
                f"the noise varies across steps: step {i} has {F_i:.3g}× the pooled noise variance; "
                "composed step by step with per-step bounds"))
            if not ok:
                chi = float(stats.chi2.ppf(a / T_tot, d))
                per_step = tuple(np.sqrt(r.noise_sq / chi) for r in runs)
        # homogeneity across coordinates
        name = "noise_homogeneity_coordinates"
        j, Fc_j, p = _smallest_variance_share(coord_model, T_tot)
        ok = p > a
        checks.append(WhiteboxCheck(name, Fc_j, p, a, ok,
            f"smallest coordinate noise / pooled = {Fc_j:.3g} (coordinate {j})" if ok else
            f"the noise varies across coordinates: coordinate {j} has {Fc_j:.3g}× the pooled noise variance; "
            "bounded by the least noisy coordinate"))
        if not ok:
            per_coord = float(np.sqrt(coord_model / stats.chi2.ppf(a / d, T_tot)).min())
        # (3) independence of consecutive draws
        name = "noise_independence"
        c = cos[np.isfinite(cos)]
        if c.size == 0:
            checks.append(WhiteboxCheck(name, math.nan, 1.0, a, True, "no consecutive pair of noisy steps: not testable"))
        else:
            p_pairs = stats.beta.sf(c * c, 0.5, (d - 1) / 2.0)
            i = int(np.argmin(p_pairs))
            p = float(min(1.0, c.size * p_pairs[i]))
            ok = p > a
            correlated = not ok
            stat = float(abs(c[i]) * math.sqrt(d))
            checks.append(WhiteboxCheck(name, stat, p, a, ok,
                f"max |cos(N_t-1, N_t)|·√d = {stat:.3g} over {c.size} pairs" if ok else
                f"consecutive noise draws are correlated (|cos| = {abs(c[i]):.3g}, d = {d}): differencing two "
                "updates cancels the noise, so the accountant's bound does not apply"))
        # gaussianity: r_t = sum N^4 / ||N||^4, exact Gaussian mean and variance
        name = "noise_gaussianity"
        pos = nsq > 0
        r = quart[pos] / (nsq[pos] ** 2)
        mu = 3.0 / (d + 2)
        var = (9.0 * d + 96.0) / ((d + 2.0) * (d + 4.0) * (d + 6.0)) - mu * mu
        Z = float((r.mean() - mu) / math.sqrt(var / r.size))
        p = float(min(1.0, 2 * stats.norm.sf(abs(Z))))
        kurt = float(r.mean() * (d + 2))
        ok = p > a
        checks.append(WhiteboxCheck(name, kurt, p, a, ok,
            f"kurtosis {kurt:.3g} (Gaussian: 3), z = {Z:.3g}" if ok else
            f"the noise is not Gaussian (kurtosis {kurt:.3g}, Gaussian 3; z = {Z:.3g}): the Gaussian accountant "
            "does not apply"))

    # (4) Poisson sampling
    checks.append(_poisson_check(rows, n, a))
    kappa_upper, kappa_point = (s_upper, s_point) if scaled else (None, None)
    if scaled:
        r_min = float(shape.min())
        s_upper, s_point = s_upper * r_min, s_point * r_min
    return WhiteboxBounds(
        noise_std_upper=s_upper, noise_std_point=s_point, sensitivity=delta_max, sensitivity_min=delta_min,
        sample_rate_lower=q_lower, sample_rate_point=q_point, steps=T, total_steps=T_tot, runs=len(runs),
        dimension=d, dataset_size=n, level=level, checks=tuple(checks), per_step_noise_upper=per_step,
        per_coordinate_noise_upper=None if scaled else per_coord, correlated_noise=correlated, no_noise=no_noise,
        scaled=scaled, per_coordinate_scale_upper=per_coord if scaled else None, scale_upper=kappa_upper,
        scale_point=kappa_point)


_Z_GRID = 1.001  # per-step noise multipliers rounded UP to powers of this ratio before composing


def _history(run: RunObservations, z: NDArray[np.float64], q: float) -> list[tuple[float, float, int]]:
    """One run's per-step noise multipliers as an accountant history: z rounded up to a 0.1 % grid
    (a larger z only lowers ε, so the bound stays a lower bound) and equal values merged."""
    z = np.asarray(z, dtype=np.float64)
    up = np.full_like(z, np.inf)
    fin = np.isfinite(z) & (z > 0)
    up[fin] = _Z_GRID ** np.ceil(np.log(z[fin]) / math.log(_Z_GRID))
    up[z == 0] = 0.0
    vals, counts = np.unique(up, return_counts=True)
    return [(float(v), q, int(c)) for v, c in zip(vals, counts)]


def _min_over_runs(runs: Sequence[RunObservations], z_of: Any, q: float, delta: float) -> tuple[float, str]:
    """min over runs of the certified lower ε of each run's own step-by-step history (each run
    executed the recipe once; the smallest is a lower bound for any one released run)."""
    best: tuple[float, str] | None = None
    cache: dict[tuple[tuple[float, float, int], ...], tuple[float, str]] = {}
    for r in runs:
        hist = tuple(_history(r, z_of(r), q))
        if hist not in cache:
            cache[hist] = compose_epsilon_lower(list(hist), delta)
        if best is None or cache[hist][0] < best[0]:
            best = cache[hist]
    if best is None:  # pragma: no cover - runs is never empty here
        raise ValueError("no run to compose")
    return best


def _grid_up(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Round positive values up to powers of ``_GRID`` (0 stays 0)."""
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = _GRID ** np.ceil(np.log(x[pos]) / math.log(_GRID))
    return out


def estimate_whitebox(runs: Sequence[RunObservations], *, dataset_size: int, delta: float, level: float,
                      accountant: str = "prv", canary_scale: float | None = None,
                      notes: Sequence[str] = ()) -> WhiteboxResult:
    """ε̂: a lower confidence bound on the accountant's ε for the mechanism the runs executed.

    See the module docstring for the model, the checks and the guarantee: under the stated
    assumption, with probability ≥ 1 − ``level``, ``ε̂ ≤ accountant(s/Δ*, q, T*, δ)``.

    Args:
        runs: :class:`RunObservations` of the audit runs (pooled).
        dataset_size: the TRUE number of training rows n.
        delta: the δ at which ε is reported (the claim's δ).
        level: total failure probability (Bonferroni over :data:`LEVEL_SHARES`).
        accountant: 'prv' (default, like ``dp_sgd``), 'rdp' or 'gdp'.
        canary_scale: recorded in the result (M of the canary ``M·C·u``).
        notes: free-text notes carried into the result.

    >>> rng = np.random.default_rng(1)
    >>> obs = RunObservations.from_noise(3.0 * rng.standard_normal((100, 40)), rng.binomial(400, 0.05, 100), 1.0)
    >>> res = estimate_whitebox([obs], dataset_size=400, delta=1e-5, level=0.05, accountant="rdp")
    >>> true = compose_epsilon([(3.0, 0.05, 100)], 1e-5, "rdp")[0]
    >>> 0.5 * true < res.epsilon <= true, res.checks_passed, res.bound_source
    (True, True, 'pooled')
    """
    if accountant not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}")
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    if canary_scale is not None:
        canary_scale = check_positive("canary_scale", canary_scale)
    b = whitebox_bounds(runs, dataset_size=dataset_size, level=level)
    reasons: list[str] = [c.detail for c in b.checks if not c.passed and not (b.no_noise and c.name.startswith("noise_"))]
    Dl = b.sensitivity
    sens_ok = b.check("sensitivity_observed").passed
    if b.scaled:
        # z_t = κ·σ_t·C_t / Δ_t, each step's noise paired with its own measured sensitivity
        z_up = min(float(np.min(b.scale_upper * r.noise_scale / r.sensitivity)) for r in runs) if sens_ok else math.inf
        z_pt = min(float(np.min(b.scale_point * r.noise_scale / r.sensitivity)) for r in runs) if sens_ok else math.inf
        pt_hist = _history(runs[0], b.scale_point * runs[0].noise_scale / runs[0].sensitivity, b.sample_rate_point) \
            if sens_ok else [(math.inf, b.sample_rate_point, b.steps)]
    else:
        z_up = b.noise_std_upper / Dl if Dl > 0 else math.inf
        z_pt = b.noise_std_point / Dl if Dl > 0 else math.inf
        pt_hist = [(z_pt, b.sample_rate_point, b.steps)]
    eps_point, _ = compose_epsilon(pt_hist, delta, accountant)
    if b.no_noise:
        eps, source, method = math.inf, "no noise", "no noise"
        reasons.insert(0, "no noise observed: the optimizer added no noise at any step")
    elif not sens_ok:
        eps, source, method = math.inf, "sensitivity unmeasurable", "not computed"
    elif b.correlated_noise:
        eps, source, method = math.inf, "correlated noise", "not computed"
    else:
        source = "pooled"
        if b.scaled:
            eps, method = _min_over_runs(runs, lambda r: b.scale_upper * r.noise_scale / r.sensitivity,
                                         b.sample_rate_lower, delta)
        else:
            eps, method = compose_epsilon_lower([(z_up, b.sample_rate_lower, b.steps)], delta)
        if b.per_step_noise_upper is not None:
            per_run = dict(zip(map(id, runs), b.per_step_noise_upper))
            if b.scaled:
                e, m = _min_over_runs(runs, lambda r: _grid_up(per_run[id(r)]) / r.sensitivity,
                                      b.sample_rate_lower, delta)
                if e > eps:
                    eps, method, source = e, m, "per-step"
            else:
                for per in b.per_step_noise_upper:
                    zs = _grid_up(per) / Dl
                    vals, counts = np.unique(zs, return_counts=True)
                    e, m = compose_epsilon_lower([(float(v), b.sample_rate_lower, int(c)) for v, c in zip(vals, counts)],
                                                 delta)
                    if e > eps:
                        eps, method, source = e, m, "per-step"
        if b.per_coordinate_scale_upper is not None:
            e, m = _min_over_runs(runs, lambda r: b.per_coordinate_scale_upper * r.noise_scale / r.sensitivity,
                                  b.sample_rate_lower, delta)
            if e > eps:
                eps, method, source = e, m, "per-coordinate"
        elif b.per_coordinate_noise_upper is not None:
            e, m = compose_epsilon_lower([(b.per_coordinate_noise_upper / Dl, b.sample_rate_lower, b.steps)], delta)
            if e > eps:
                eps, method, source = e, m, "per-coordinate"
        if math.isinf(eps) and source != "pooled":
            reasons.insert(0, f"a {'step' if source == 'per-step' else 'coordinate'} without noise: ε = ∞")
    declared = next((r.declared_noise_multiplier for r in runs if r.declared_noise_multiplier is not None), None)
    return WhiteboxResult(
        epsilon=float(eps), delta=delta, epsilon_point=float(eps_point), noise_multiplier=float(z_up),
        noise_multiplier_point=float(z_pt), noise_std_upper=b.noise_std_upper, noise_std_point=b.noise_std_point,
        sensitivity=b.sensitivity, sensitivity_min=b.sensitivity_min, sample_rate_lower=b.sample_rate_lower,
        sample_rate_point=b.sample_rate_point, steps=b.steps, total_steps=b.total_steps, runs=b.runs,
        dimension=b.dimension, dataset_size=b.dataset_size, accountant=accountant, level=b.level, checks=b.checks,
        bound_source=source, epsilon_method=method, reasons=tuple(reasons), canary_scale=canary_scale,
        declared_noise_multiplier=declared, notes=tuple(notes),
        assumption=(ASSUMPTION_SCALED if b.scaled else ASSUMPTION).format(accountant=accountant))


def with_notes(result: WhiteboxResult, *notes: str) -> WhiteboxResult:
    """``result`` with ``notes`` appended (used by :func:`privaudit.audits.whitebox.whitebox_audit`)."""
    return replace(result, notes=result.notes + tuple(notes))


def with_release_changes(result: WhiteboxResult, changes: Sequence[str]) -> WhiteboxResult:
    """``result`` with the check ``release_model_watched``: failed (ε̂ = ∞, the first changes as
    reasons) when something reached the released model outside the watched DP steps.

    The accountant's bound covers the watched steps only; a parameter or buffer of the returned
    model that changed elsewhere (fine-tuning, a second optimizer, data statistics, another model)
    makes the released model's ε unbounded by anything the audit saw.
    """
    changes = list(changes)
    if not changes:
        check = WhiteboxCheck("release_model_watched", 0.0, 1.0, 0.0, True,
                              "every parameter and buffer of the returned model changed only in watched DP steps")
        return replace(result, checks=result.checks + (check,))
    shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
    check = WhiteboxCheck("release_model_watched", float(len(changes)), 0.0, 0.0, False,
                          f"the released model changed outside the watched DP steps: {shown}")
    return replace(result, epsilon=math.inf, bound_source="changes outside watched steps",
                   epsilon_method="not computed", checks=result.checks + (check,),
                   reasons=(check.detail,) + result.reasons)
