"""Trade-off curves of DP claims, and the ε̂ of a claim's own family refuted by an audited point.

A DP claim is more than one (ε, δ) point: a mechanism's **trade-off curve** f (Dong, Roth & Su 2022,
"Gaussian Differential Privacy", JRSS-B, Def. 2.1) gives, for every test between "canary in" and
"canary out", the smallest false-negative rate f(α) at false-positive rate α. Equivalently its
**privacy profile** δ(ε) (Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling",
Def. 2): a mechanism is (ε, δ(ε))-DP for every ε, and (Dong et al. 2022, Prop. 2.12; Kairouz, Oh &
Viswanath 2015, Thm. 2.1) it is then f-DP with

    f(α) = sup_ε max(0, 1 − δ(ε) − e^ε α, e^{−ε} (1 − δ(ε) − α)).                      (P)

One (ε, δ) point alone is the polygon ``f_{ε,δ}`` (one term of (P)). Every curve here is symmetric
(f = f⁻¹: the claims hold for both directions of the neighbouring relation), so a point (α, β)
**refutes** a curve iff β < f(α) or α < f(β).

**Soundness of a refutation.** If an audit bounds a threshold test's rates by FPR ≤ FPR_U and
FNR ≤ FNR_U jointly with probability ≥ 1 − level, and the mechanism is f-DP, then
FNR_U ≥ FNR ≥ f(FPR) ≥ f(FPR_U) (f is non-increasing), so the bounded point refutes f with
probability ≤ level — for *every* mechanism satisfying f, whatever its own curve.

**Families and ε̂.** Each claim comes with a one-parameter family of curves ordered by a leakage
parameter θ (a larger θ is a less private member, its curve lies below): the claim is the member
θ_claim. The point refutes exactly the members θ < θ* (the curve is non-increasing in θ), and the ε̂
reported is ε(θ*, δ) — the largest ε at the claim's δ among the refuted members. A point refutes the
claim's own member iff θ* > θ_claim.

============================  =========================  ======================================
family                        θ                          curve, ε(θ, δ)
============================  =========================  ======================================
:class:`EpsDeltaFamily`       ε at fixed δ               f_{ε,δ}; ε (Kairouz et al. 2015)
:class:`GaussianFamily`       μ (GDP)                    G_μ(α) = Φ(Φ⁻¹(1−α) − μ); Dong et al.
                                                         Cor. 2.13
:class:`LaplaceFamily`        ε₀ = Δ / b                 Dong et al. 2022 App. (Laplace pair);
                                                         δ(ε) = 1 − e^{(ε−ε₀)/2} (Balle et al.
                                                         2018 profile) → ε₀ + 2 log(1 − δ)
:class:`RandomizedResponseFamily`  ε₀ (k classes)        exact curve of the discrete pair;
                                                         δ(ε) = (e^{ε₀} − e^ε)/(e^{ε₀} + k − 1)
:class:`SubsampledGaussianFamily`  1/σ at fixed q, T     (P) on a grid of the PLD profile
                                                         (dp_accounting, pessimistic estimate,
                                                         Poisson add/remove); ε from the PLD
============================  =========================  ======================================

numpy/scipy only (dp_accounting imported inside :class:`SubsampledGaussianFamily`); imports nothing
from privaudit but other ``stats`` modules.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ._checks import check_int, check_prob
from .fdp_one_run import gdp_epsilon

__all__ = [
    "EpsDeltaFamily",
    "GaussianFamily",
    "LaplaceFamily",
    "RandomizedResponseFamily",
    "RefutedPoint",
    "SubsampledGaussianFamily",
    "TradeoffFamily",
    "laplace_tradeoff",
    "profile_tradeoff",
    "refute_point",
]

_TOL = 1e-12  # a point must lie this far below a curve to refute it (float rounding of the curves)


def _alpha(a: ArrayLike) -> NDArray[np.float64]:
    return np.clip(np.asarray(a, dtype=np.float64), 0.0, 1.0)


def profile_tradeoff(eps: ArrayLike, delta: ArrayLike, alpha: ArrayLike) -> NDArray[np.float64]:
    """(P) of the module docstring: the trade-off curve implied by the (ε_i, δ_i) pairs, at ``alpha``.

    Sound for any subset of a valid profile (fewer pairs give a lower curve). One pair is the
    (ε, δ) polygon.

    >>> round(float(profile_tradeoff([1.0], [0.0], 0.1)), 6)  # 1 − e·0.1
    0.728172
    >>> float(profile_tradeoff([0.0], [0.0], 0.3))  # ε = 0: the diagonal
    0.7
    """
    e = np.asarray(eps, dtype=np.float64).reshape(-1, 1)
    d = np.asarray(delta, dtype=np.float64).reshape(-1, 1)
    a = _alpha(alpha)
    flat = a.reshape(1, -1)
    ee = np.exp(np.minimum(e, 700.0))
    out = np.maximum(np.maximum(0.0, 1.0 - d - ee * flat), (1.0 - d - flat) / ee).max(axis=0)
    return out.reshape(a.shape)


def laplace_tradeoff(epsilon: float, alpha: ArrayLike) -> NDArray[np.float64]:
    """T(Lap(0, 1), Lap(ε₀, 1)) at ``alpha``: the exact curve of the Laplace mechanism with Δ/b = ε₀.

    Rejecting for x > t (Neyman-Pearson, the likelihood ratio is monotone): ``1 − e^{ε₀} α`` for
    α ≤ e^{−ε₀}/2, ``e^{−ε₀}/(4α)`` up to α = 1/2, ``e^{−ε₀}(1 − α)`` beyond (Dong, Roth & Su 2022,
    the Laplace example of §2; derived from the two exponential tails).

    >>> round(float(laplace_tradeoff(1.0, 0.5)), 6)  # e^-1 / 2
    0.18394
    >>> float(laplace_tradeoff(0.0, 0.25))
    0.75
    """
    e0 = float(epsilon)
    a = _alpha(alpha)
    if e0 <= 0.0:
        return 1.0 - a
    em = math.exp(-min(e0, 700.0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mid = em / (4.0 * a)
    out = np.where(a <= em / 2.0, 1.0 - a / em, np.where(a <= 0.5, mid, em * (1.0 - a)))
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class RefutedPoint:
    """What one certified (FPR_U, FNR_U) point says about a claim (:func:`refute_point`)."""

    fpr_upper: float
    fnr_upper: float
    theta: float  #: θ*: every member with θ < θ* is refuted
    epsilon: float  #: ε(θ*, δ): the ε̂ of the claim's family
    refutes_claim: bool  #: the claim's own member lies above the point
    curve_at_point: float  #: f_{θ_claim}(FPR_U): the FNR the claim allows at the point's FPR


class TradeoffFamily(ABC):
    """A family of symmetric trade-off curves ordered by a leakage parameter θ ≥ 0 (see module doc)."""

    #: short name written to ``metrics/audit.json`` (``curve``)
    name: str
    #: the claim's own member
    theta_claim: float
    #: a θ so large that its curve is 0 (or practically so) for α > 0; the bisection's ceiling
    theta_max: float = 60.0

    @abstractmethod
    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        """f_θ(α) (vectorised over α)."""

    @abstractmethod
    def epsilon(self, theta: float, delta: float) -> float:
        """The ε at ``delta`` of member θ (``inf`` when it is not (ε, δ)-DP for any finite ε)."""

    def describe(self) -> str:
        """The curve the claim is tested against, in words (the report's claims table)."""
        return self.name

    def refutes(self, fpr: float, fnr: float, theta: float | None = None) -> bool:
        """Whether the point (``fpr``, ``fnr``) lies below member θ (default: the claim)."""
        th = self.theta_claim if theta is None else theta
        f = self.curve(th, np.array([fpr, fnr]))
        return bool(fnr < f[0] - _TOL or fpr < f[1] - _TOL)

    def theta_star(self, fpr: float, fnr: float) -> float:
        """sup{θ : the point refutes f_θ} (0 when it refutes none), by bisection (the set is [0, θ*))."""
        if not self.refutes(fpr, fnr, 0.0):
            return 0.0
        lo, hi = 0.0, self.theta_max
        if self.refutes(fpr, fnr, hi):
            return math.inf
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.refutes(fpr, fnr, mid):
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-9 * max(1.0, hi):
                break
        return lo


def refute_point(family: TradeoffFamily, fpr_upper: float, fnr_upper: float, delta: float) -> RefutedPoint:
    """Test a certified point against a claim's family: θ*, its ε at ``delta``, and the claim's verdict.

    >>> r = refute_point(EpsDeltaFamily(1.0, 1e-5), 0.05, 0.5, 1e-5)  # log((1 − δ − 0.5)/0.05)
    >>> round(r.epsilon, 4), r.refutes_claim
    (2.3026, True)
    >>> refute_point(GaussianFamily(1.0), 0.31, 0.31, 1e-5).refutes_claim  # just above G_1 at Φ(−1/2) ≈ 0.3085
    False
    """
    fpr = check_prob("fpr_upper", fpr_upper)
    fnr = check_prob("fnr_upper", fnr_upper)
    refutes = family.refutes(fpr, fnr)
    theta = family.theta_star(fpr, fnr)
    # the gate's soundness rests on the claim's own curve: a point that does not refute it never reports
    # more than the claim's own ε (numerical accountants may order ε and θ differently by a hair), and one
    # that does refute it refutes at least the claim's θ
    theta = max(theta, family.theta_claim) if refutes else min(theta, family.theta_claim)
    eps = math.inf if math.isinf(theta) else (0.0 if theta == 0.0 else family.epsilon(theta, delta))
    return RefutedPoint(fpr_upper=fpr, fnr_upper=fnr, theta=theta, epsilon=eps,
                        refutes_claim=refutes,
                        curve_at_point=float(family.curve(family.theta_claim, np.array([fpr]))[0]))


@dataclass(frozen=True)
class EpsDeltaFamily(TradeoffFamily):
    """The (ε, δ) polygon at fixed δ, θ = ε: no assumption beyond the claim (Kairouz et al. 2015 Thm 2.1).

    >>> EpsDeltaFamily(1.0, 1e-5).theta_star(0.05, 0.5) == EpsDeltaFamily(9.0, 1e-5).theta_star(0.05, 0.5)
    True
    """

    theta_claim: float
    delta: float
    name: str = "eps_delta"

    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        return profile_tradeoff([theta], [self.delta], alpha)

    def epsilon(self, theta: float, delta: float) -> float:
        return float(theta)  # every member is (θ, self.delta)-DP: the claim's δ

    def theta_star(self, fpr: float, fnr: float) -> float:
        best = 0.0
        for a, b in ((fnr, fpr), (fpr, fnr)):
            num = 1.0 - self.delta - a
            if num > 0.0:
                best = max(best, math.inf if b == 0.0 else math.log(num / b))
        return best

    def describe(self) -> str:
        return f"(eps, delta) polygon at eps={self.theta_claim:.4g}, delta={self.delta:.3g}"


@dataclass(frozen=True)
class GaussianFamily(TradeoffFamily):
    """μ-GDP curves G_μ (Dong, Roth & Su 2022 Def. 2.6); the Gaussian mechanism with noise σ·Δ is
    (1/σ)-GDP (their Thm. 2.7). ε(μ, δ) by Cor. 2.13; ε = ∞ at δ = 0.

    >>> round(float(GaussianFamily(1.0).curve(1.0, 0.5)), 6)  # Φ(−1)
    0.158655
    """

    theta_claim: float
    name: str = "gaussian"
    theta_max: float = 40.0

    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        a = _alpha(alpha)
        with np.errstate(divide="ignore"):  # Φ⁻¹(1 − α) = −Φ⁻¹(α): no rounding of 1 − α at tiny α
            return special.ndtr(-special.ndtri(a) - float(theta))

    def epsilon(self, theta: float, delta: float) -> float:
        if theta == 0.0:
            return 0.0
        if delta <= 0.0:
            return math.inf
        return gdp_epsilon(float(theta), delta)

    def describe(self) -> str:
        return f"Gaussian trade-off curve G_mu, mu={self.theta_claim:.4g}"


def _laplace_epsilon(theta: float, delta: float) -> float:
    return max(0.0, float(theta) + 2.0 * math.log1p(-min(delta, 1.0 - 1e-16)))


@dataclass(frozen=True)
class LaplaceFamily(TradeoffFamily):
    """Laplace mechanisms, θ = ε₀ = Δ/b (exact curve :func:`laplace_tradeoff`); pure ε₀-DP.

    >>> f = LaplaceFamily(1.0)
    >>> round(f.epsilon(1.0, 0.0), 6), round(f.epsilon(1.0, 1e-5), 6)
    (1.0, 0.99998)
    """

    theta_claim: float
    name: str = "laplace"

    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        return laplace_tradeoff(theta, alpha)

    def epsilon(self, theta: float, delta: float) -> float:
        return _laplace_epsilon(theta, delta)

    def describe(self) -> str:
        return f"Laplace trade-off curve, eps0={self.theta_claim:.4g} (scale/sensitivity {1 / self.theta_claim:.4g})"


@dataclass(frozen=True)
class RandomizedResponseFamily(TradeoffFamily):
    """k-ary randomized response with parameter ε₀ (true answer w.p. e^{ε₀}/(e^{ε₀}+k−1); Kairouz, Bonawitz &
    Ramage 2016, "Discrete distribution estimation under local privacy", §2, k-RR).

    The curve is the exact trade-off of two inputs' output distributions: piecewise linear through
    (0, 1), (r, 1 − p), ((k−1) r, r), (1, 0) with p = e^{ε₀}/(e^{ε₀}+k−1), r = 1/(e^{ε₀}+k−1).
    For k = 2 it is the (ε₀, 0) polygon.

    >>> rr = RandomizedResponseFamily(1.0, 2)
    >>> bool(np.allclose(rr.curve(1.0, [0.1, 0.5]), profile_tradeoff([1.0], [0.0], [0.1, 0.5])))
    True
    """

    theta_claim: float
    classes: int
    name: str = "randomized_response"

    def __post_init__(self) -> None:
        check_int("classes", self.classes, minimum=2)

    def _pr(self, theta: float) -> tuple[float, float]:
        t = min(float(theta), 700.0)
        den = math.exp(t) + self.classes - 1
        return math.exp(t) / den, 1.0 / den

    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        p, r = self._pr(theta)
        k = self.classes
        xs = np.array([0.0, r, (k - 1) * r, 1.0])
        ys = np.array([1.0, 1.0 - p, r, 0.0])
        return np.interp(_alpha(alpha), xs, ys)

    def epsilon(self, theta: float, delta: float) -> float:
        p, r = self._pr(theta)
        if delta >= p - r:
            return 0.0
        return float(math.log(math.exp(min(float(theta), 700.0)) - delta / r))

    def describe(self) -> str:
        return f"randomized response over {self.classes} classes, eps0={self.theta_claim:.4g}"


#: the subsampled-Gaussian search stops widening once a refuted member's ε exceeds this (PLDs of tiny σ are slow)
_SEARCH_EPS_CAP = 100.0

#: the PLD's ε grid for (P): dense where profiles bend, up to where δ(ε) is negligible
_PROFILE_EPS = np.concatenate([np.linspace(0.0, 4.0, 161)[:-1], np.linspace(4.0, 60.0, 281)])


@lru_cache(maxsize=256)
def _pld(noise_multiplier: float, sample_rate: float, steps: int, discretization: float):  # type: ignore[no-untyped-def]
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(standard_deviation=noise_multiplier, sensitivity=1.0,
                                      sampling_prob=sample_rate, value_discretization_interval=discretization,
                                      pessimistic_estimate=True, use_connect_dots=True)
    return one.self_compose(steps) if steps > 1 else one


@lru_cache(maxsize=256)
def _sg_profile(noise_multiplier: float, sample_rate: float, steps: int, discretization: float
                ) -> NDArray[np.float64]:
    d = np.asarray(_pld(noise_multiplier, sample_rate, steps, discretization).get_delta_for_epsilon(_PROFILE_EPS),
                   dtype=np.float64)
    return np.clip(d, 0.0, 1.0)


@dataclass(frozen=True)
class SubsampledGaussianFamily(TradeoffFamily):
    """T steps of the Poisson-subsampled Gaussian mechanism (DP-SGD), θ = 1/σ at fixed q and T.

    The curve is (P) over the privacy profile of dp_accounting's privacy-loss distribution
    (Koskela et al. 2020; Doroshenko et al. 2022 "Connect the dots", pessimistic estimate, so every
    δ_i is an upper bound and the curve a lower bound on the mechanism's own: sound), for the
    add/remove relation (both directions). ε(θ, δ) is the same PLD's ε at δ. No Gaussian (CLT)
    approximation is made.

    >>> f = SubsampledGaussianFamily(1 / 1.0, sample_rate=1.0, steps=1)  # q = 1, T = 1: G_1
    >>> abs(f.epsilon(1.0, 1e-5) - GaussianFamily(1.0).epsilon(1.0, 1e-5)) < 0.01
    True
    """

    theta_claim: float
    sample_rate: float
    steps: int
    discretization: float = 1e-3
    name: str = "subsampled_gaussian"
    theta_max: float = 20.0

    def __post_init__(self) -> None:
        check_prob("sample_rate", self.sample_rate, open_low=True)
        check_int("steps", self.steps, minimum=1)

    def _profile(self, theta: float) -> NDArray[np.float64]:
        return _sg_profile(1.0 / float(theta), float(self.sample_rate), int(self.steps), float(self.discretization))

    def curve(self, theta: float, alpha: ArrayLike) -> NDArray[np.float64]:
        if theta <= 0.0:
            return 1.0 - _alpha(alpha)
        return profile_tradeoff(_PROFILE_EPS, self._profile(theta), alpha)

    def epsilon(self, theta: float, delta: float) -> float:
        if theta <= 0.0:
            return 0.0
        if delta <= 0.0:
            return math.inf
        p = _pld(1.0 / float(theta), float(self.sample_rate), int(self.steps), float(self.discretization))
        return float(p.get_epsilon_for_delta(delta))

    def theta_star(self, fpr: float, fnr: float) -> float:
        # PLDs are costly (and the more so the smaller σ): bracket from the claim's own θ by factors of 2,
        # then bisect in log θ to a relative 1e-3 (about 10 PLDs). Upwards the search stops at the first
        # member whose ε at δ = 1e-5 exceeds _SEARCH_EPS_CAP: a refuted member is a valid ε̂, if not the largest.
        th = self.theta_claim
        if self.refutes(fpr, fnr, th):
            lo, hi = th, 2.0 * th
            while self.refutes(fpr, fnr, hi):
                lo, hi = hi, 2.0 * hi
                if hi > self.theta_max or self.epsilon(lo, 1e-5) > _SEARCH_EPS_CAP:
                    return lo
        else:
            lo, hi = th / 2.0, th
            while not self.refutes(fpr, fnr, lo):
                lo, hi = lo / 2.0, lo
                if lo < 1e-4:
                    return 0.0
        while hi / lo > 1.0 + 1e-3:
            mid = math.sqrt(lo * hi)
            if self.refutes(fpr, fnr, mid):
                lo = mid
            else:
                hi = mid
        return lo

    def describe(self) -> str:
        return (f"subsampled Gaussian (PLD), sigma={1 / self.theta_claim:.4g}, q={self.sample_rate:.4g}, "
                f"T={self.steps}")
