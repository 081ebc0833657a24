"""Privacy accounting of Poisson-subsampled Gaussian steps: the exact ε of one step and opacus's accountants.

The white-box estimator (:mod:`privaudit.stats.whitebox`) turns its bounds on the noise and the
sampling rate into ε̂ here: :func:`compose_epsilon` runs opacus's RDP (Mironov 2017), PRV (Gopi et al.
2021) or GDP (Dong, Roth & Su 2022) accountant, imported inside the function so that the statistics
import no opacus; :func:`compose_epsilon_lower` is the PRV accountant's certified lower end (a lower
bound on the true ε, what the white-box ε̂ uses); :func:`subsampled_gaussian_one_step_epsilon` is the exact one-step ε (hockey-stick
divergence of the dominating pair; Balle & Wang 2018, Theorem 8 at q = 1).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal, Sequence

import numpy as np
from scipy import optimize, stats

from ._checks import check_int, check_prob

__all__ = ["ACCOUNTANTS", "PRV_MAX_POINTS", "compose_epsilon", "compose_epsilon_lower",
           "subsampled_gaussian_one_step_epsilon"]

Accountant = Literal["rdp", "prv", "gdp"]
#: the opacus accountants :func:`compose_epsilon` runs
ACCOUNTANTS = ("rdp", "prv", "gdp")
_ACCOUNTANTS = ACCOUNTANTS

#: opacus's PRV accountant is skipped (one-step exact fallback) above this many grid points
PRV_MAX_POINTS = 4_000_000




def _hockey_stick_remove(a: float, z: float, q: float) -> float:
    """H_a(P‖Q), P = (1−q)N(0,z²) + qN(1,z²), Q = N(0,z²) (likelihood ratio increasing in x)."""
    x = z * z * math.log((a - (1.0 - q)) / q) + 0.5
    sf0, sf1 = stats.norm.sf(x / z), stats.norm.sf((x - 1.0) / z)
    return float(max(0.0, (1.0 - q) * sf0 + q * sf1 - a * sf0))


def _hockey_stick_add(a: float, z: float, q: float) -> float:
    """H_a(Q‖P) for the same pair (region where Q/P > a, x below a threshold)."""
    inv = 1.0 / a - (1.0 - q)
    if inv <= 0.0:
        return 0.0
    x = z * z * math.log(inv / q) + 0.5
    cdf0, cdf1 = stats.norm.cdf(x / z), stats.norm.cdf((x - 1.0) / z)
    return float(max(0.0, cdf0 - a * ((1.0 - q) * cdf0 + q * cdf1)))


def subsampled_gaussian_one_step_epsilon(noise_multiplier: float, sample_rate: float, delta: float) -> float:
    """Exact ε(δ) of ONE Poisson-subsampled Gaussian step (add/remove, sensitivity 1).

    The smallest ε with ``H_{e^ε}(P‖Q) ≤ δ`` and ``H_{e^ε}(Q‖P) ≤ δ`` for
    ``P = (1−q) N(0, z²) + q N(1, z²)``, ``Q = N(0, z²)`` (the dominating pair of the subsampled
    Gaussian mechanism); the likelihood ratio is monotone, so each hockey-stick divergence is a
    closed form in Φ.  Composition never lowers ε, so this lower-bounds the ε of any number of
    such steps.  At q = 1 it is the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    >>> round(subsampled_gaussian_one_step_epsilon(1.0, 1.0, 1e-5), 3)
    4.377
    >>> subsampled_gaussian_one_step_epsilon(1.0, 0.0, 1e-5)
    0.0
    >>> subsampled_gaussian_one_step_epsilon(0.0, 0.5, 1e-5)
    inf
    """
    z = float(noise_multiplier)
    if math.isnan(z) or z < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier!r}")
    q = check_prob("sample_rate", sample_rate)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    if q == 0.0 or math.isinf(z):
        return 0.0
    if z == 0.0:
        return math.inf
    out = 0.0
    for h in (_hockey_stick_remove, _hockey_stick_add):
        if h(1.0, z, q) <= delta:
            continue
        hi = 1.0
        while h(math.exp(hi), z, q) > delta:
            hi *= 2.0
            if hi > 1e4:
                return math.inf
        eps = optimize.brentq(lambda e: h(math.exp(e), z, q) - delta, 0.0, hi, xtol=1e-10)
        out = max(out, float(eps))
    return out


def _prv_domain_size(history: list[tuple[float, float, int]], eps_error: float, delta_error: float) -> float:
    """Half-width L of the grid opacus's PRV accountant allocates for ``history`` (its own sizing rule,
    ``compute_safe_domain_size``: an RDP bound over many fractional orders, seconds for a long schedule)."""
    from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV, compute_safe_domain_size

    return float(compute_safe_domain_size(prvs=[PoissonSubsampledGaussianPRV(q, z) for z, q, _ in history],
                                          max_self_compositions=[k for _, _, k in history],
                                          eps_error=eps_error, delta_error=delta_error))


def _prv_points(history: list[tuple[float, float, int]], delta: float, L: float | None = None) -> float:
    """Grid size opacus's PRV accountant would allocate for ``history`` (its own sizing rule); ``L``: its
    half-width when already computed (:func:`_prv_domain_size` with ``eps_error`` 0.01, ``delta / 1000``)."""
    eps_error, delta_error = 0.01, delta / 1000
    total = sum(k for _, _, k in history)
    if L is None:
        L = _prv_domain_size(history, eps_error, delta_error)
    mesh = eps_error / math.sqrt(total * math.log(12 / delta_error) / 2)
    return float(2 * L / mesh)


def _prv_accountant(history: list[tuple[float, float, int]], L: float) -> Any:
    """opacus's ``PRVAccountant`` on ``history`` whose grid half-width is ``L``, already computed for the
    size check (:func:`_prv_domain_size`), instead of a second identical ``compute_safe_domain_size``.

    The grid is opacus's own (``PRVAccountant._get_domain``: the same mesh formula, in numpy), so every ε is
    the bits opacus gives; only the domain size is not computed twice (half of a long schedule's cost).
    """
    from opacus.accountants import PRVAccountant
    from opacus.accountants.analysis.prv import Domain

    class _SizedPRVAccountant(PRVAccountant):
        def _get_domain(self, prvs: Any, num_self_compositions: list[int], eps_error: float,
                        delta_error: float) -> Any:
            mesh_size = eps_error / np.sqrt(sum(num_self_compositions) * np.log(12 / delta_error) / 2)
            return Domain.create_aligned(-L, L, mesh_size)

    acc = _SizedPRVAccountant()
    acc.history = list(history)
    return acc


def compose_epsilon(history: Sequence[tuple[float, float, int]], delta: float,
                    accountant: str = "prv") -> tuple[float, str]:
    """ε of a composition of Poisson-subsampled Gaussian steps by opacus's ``accountant``.

    ``history`` lists ``(noise_multiplier, sample_rate, steps)``.  Returns ``(ε, method)``:
    method ``"accountant"``; ``"no noise"`` (ε = ∞, some z = 0); or ``"one-step exact"`` when the
    accountant cannot run (PRV grid > :data:`PRV_MAX_POINTS`, or it raises) — then ε is the exact
    ε of the worst single step, a lower bound on the composition's true ε.  'gdp' only supports
    one (z, q): a varying history is replaced by the z with the same Σ (e^{1/z²} − 1), which is
    what opacus's GDP formula composes.

    >>> eps, how = compose_epsilon([(1.0, 0.1, 100)], 1e-5, "rdp")
    >>> how, round(eps, 2)
    ('accountant', 7.9)
    >>> compose_epsilon([(0.0, 0.1, 1), (1.0, 0.1, 9)], 1e-5, "rdp")
    (inf, 'no noise')
    """
    if accountant not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}")
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    hist: list[tuple[float, float, int]] = []
    for z, q, k in history:
        z, q, k = float(z), check_prob("sample_rate", q), check_int("steps", k)
        if math.isnan(z) or z < 0:
            raise ValueError(f"noise multipliers must be >= 0, got {z!r}")
        if q > 0 and k > 0 and not math.isinf(z):
            hist.append((z, q, k))
    if not hist:
        return 0.0, "accountant"
    if any(z == 0.0 for z, _, _ in hist):
        return math.inf, "no noise"
    merged: dict[tuple[float, float], int] = {}
    for z, q, k in hist:
        merged[(z, q)] = merged.get((z, q), 0) + k
    hist = [(z, q, k) for (z, q), k in merged.items()]
    if accountant == "gdp" and len(hist) > 1:
        qs = {q for _, q, _ in hist}
        if len(qs) == 1:
            total = sum(k for _, _, k in hist)
            with np.errstate(over="ignore"):
                s = sum(k * math.expm1(min(1.0 / (z * z), 700.0)) for z, _, k in hist)
            hist = [(1.0 / math.sqrt(math.log1p(s / total)), qs.pop(), total)]
        else:  # not representable: worst step, all steps
            zmin = min(z for z, _, _ in hist)
            hist = [(zmin, max(q for _, q, _ in hist), sum(k for _, _, k in hist))]

    def one_step() -> float:
        return max(subsampled_gaussian_one_step_epsilon(z, q, delta) for z, q, _ in hist)

    from opacus.accountants import create_accountant

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if accountant == "prv":
                L = _prv_domain_size(hist, 0.01, delta / 1000)  # get_epsilon's default eps_error, delta_error
                if _prv_points(hist, delta, L) > PRV_MAX_POINTS:
                    return one_step(), "one-step exact"
                acc = _prv_accountant(hist, L)
            else:
                acc = create_accountant(mechanism=accountant)
                acc.history = list(hist)
            eps = float(acc.get_epsilon(delta=delta))
        except (MemoryError, OverflowError, ValueError, ArithmeticError, RuntimeError):
            return one_step(), "one-step exact"
    if not math.isfinite(eps):
        return one_step(), "one-step exact"
    return eps, "accountant"


def _clean_history(history: Sequence[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    hist: dict[tuple[float, float], int] = {}
    for z, q, k in history:
        z, q, k = float(z), check_prob("sample_rate", q), check_int("steps", k)
        if math.isnan(z) or z < 0:
            raise ValueError(f"noise multipliers must be >= 0, got {z!r}")
        if q > 0 and k > 0 and not math.isinf(z):
            hist[(z, q)] = hist.get((z, q), 0) + k
    return [(z, q, k) for (z, q), k in hist.items()]


def compose_epsilon_lower(history: Sequence[tuple[float, float, int]], delta: float,
                          eps_error: float = 0.01) -> tuple[float, str]:
    """A certified LOWER bound on the true ε(δ) of a composition of Poisson-subsampled Gaussian steps.

    ``history`` lists ``(noise_multiplier, sample_rate, steps)``; the steps may differ (noise and
    clip schedules). The PRV accountant of Gopi, Lee & Wutschitz 2021 ("Numerical Composition of
    Differential Privacy", NeurIPS 2021; opacus's ``PRVAccountant``) brackets the true ε of the
    composed privacy curve, ``ε_low ≤ ε(δ) ≤ ε_up``, from its discretisation errors
    (``eps_error``, ``delta_error = δ/1000``); ``get_epsilon`` returns ε_up, this returns
    ``max(ε_low, ε of the worst single step)`` — both lower bounds of the true ε, so a claim from
    ANY sound accountant (RDP, PRV, PLD) lies above it. Method ``"prv lower"``; ``"one-step exact"``
    when the PRV grid would be too large or it fails; ``"no noise"`` (∞) when some z = 0.

    >>> lo, how = compose_epsilon_lower([(1.0, 0.1, 100)], 1e-5)
    >>> up, _ = compose_epsilon([(1.0, 0.1, 100)], 1e-5, "prv")
    >>> how, lo < up, round(up - lo, 2) <= 0.05
    ('prv lower', True, True)
    """
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    hist = _clean_history(history)
    if not hist:
        return 0.0, "prv lower"
    if any(z == 0.0 for z, _, _ in hist):
        return math.inf, "no noise"
    one = max(subsampled_gaussian_one_step_epsilon(z, q, delta) for z, q, _ in hist)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            delta_error = delta / 1000
            L = _prv_domain_size(hist, eps_error, delta_error)
            if _prv_points(hist, delta, L if eps_error == 0.01 else None) > PRV_MAX_POINTS:
                return one, "one-step exact"
            acc = _prv_accountant(hist, L)
            # opacus exposes only ε_up (get_epsilon); the bracket comes from the same discretised PRV
            dprv = acc._get_dprv(eps_error=eps_error, delta_error=delta_error)
            low, _, _ = dprv.compute_epsilon(delta, delta_error, eps_error)
        except (MemoryError, OverflowError, ValueError, ArithmeticError, RuntimeError):
            return one, "one-step exact"
    low = float(low)
    if not math.isfinite(low) or low <= one:
        return one, "one-step exact"
    return low, "prv lower"
