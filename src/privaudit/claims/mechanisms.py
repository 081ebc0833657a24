"""A claim's mechanism: what a DP claim says beyond its (ε, δ) point (the neighbourhood it is made for is
:class:`privaudit.claims.neighbourhood.Neighbourhood`).

A recipe that knows its mechanism declares it, and every gated black-box bound is then tested
against that mechanism's whole trade-off curve (:mod:`privaudit.stats.tradeoff`) instead of the
bare (ε, δ) polygon — a sharper test that needs no assumption the claim does not make. A claim
without a mechanism is tested against its polygon only (assumption-free).

``params.yaml`` (a ``kind: python`` defender; privaudit's own recipes declare theirs, see
:func:`privaudit.defenders.base.Defender.claimed_mechanism`)::

    mechanism: {kind: laplace, scale: 1.0}          # Laplace noise, scale / L1 sensitivity (ε₀ = 1/scale)
    mechanism: {kind: gaussian, noise_multiplier: 4.0}   # Gaussian noise, σ / L2 sensitivity
    mechanism: {kind: subsampled_gaussian, noise_multiplier: 1.1, sample_rate: 0.01, steps: 1000}
    mechanism: {kind: gdp, mu: 0.5}
    mechanism: {kind: randomized_response, epsilon: 1.0, classes: 10}

Each model is pydantic only (loading params imports no numpy-heavy accountant) and an immutable event
consumed whole, the way dp_accounting's ``DpEvent`` is: consumers call :meth:`family` (the trade-off curves,
importing the statistics), :meth:`epsilon_at`, :meth:`dp_event` and :meth:`pld` (dp_accounting, imported
inside), never unpack (σ, q, T) at a call site. :func:`check_against_claim` refuses a mechanism weaker than the claim it
comes with, naming both ε.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from privaudit.stats.tradeoff import TradeoffFamily

__all__ = ["DeclaredMechanism", "GaussianMechanism", "GdpMechanism", "LaplaceMechanism", "MECHANISM_KINDS",
           "RandomizedResponseMechanism", "SubsampledGaussianMechanism", "check_against_claim", "parse_mechanism"]


class _Mechanism(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def family(self) -> "TradeoffFamily":
        """The family of trade-off curves this mechanism belongs to, with it as the claim's member."""
        raise NotImplementedError

    def epsilon_at(self, delta: float) -> float:
        """The mechanism's own ε at ``delta`` (``inf`` where it has none, e.g. a Gaussian at δ = 0)."""
        fam = self.family()
        return fam.epsilon(fam.theta_claim, delta)

    def dp_event(self) -> Any:
        """This mechanism as dp_accounting's ``DpEvent`` (what its ``PLDAccountant`` composes)."""
        raise NotImplementedError

    def pld(self, discretization: float = 1e-4) -> Any:
        """The pessimistic privacy-loss distribution of this mechanism (dp_accounting's
        ``PrivacyLossDistribution``; Koskela et al. 2020, Doroshenko et al. 2022 "Connect the dots"), on a
        grid of ``discretization`` in privacy loss: what :mod:`privaudit.claims.composition` composes.
        Cached per (mechanism, discretization): the model is immutable."""
        return _pld(self, float(discretization))

    def _pld(self, discretization: float) -> Any:
        raise NotImplementedError


@lru_cache(maxsize=128)
def _pld(mechanism: "_Mechanism", discretization: float) -> Any:
    return mechanism._pld(discretization)


class GaussianMechanism(_Mechanism):
    """Gaussian noise of standard deviation ``noise_multiplier`` × the L2 sensitivity: (1/σ)-GDP."""

    kind: Literal["gaussian"]
    noise_multiplier: float = Field(gt=0, allow_inf_nan=False, description="sigma / L2 sensitivity")

    def family(self) -> "TradeoffFamily":
        from privaudit.stats.tradeoff import GaussianFamily

        return GaussianFamily(1.0 / self.noise_multiplier)

    def dp_event(self) -> Any:
        from dp_accounting import dp_event

        return dp_event.GaussianDpEvent(self.noise_multiplier)

    def _pld(self, discretization: float) -> Any:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_gaussian_mechanism(self.noise_multiplier, value_discretization_interval=discretization)


class GdpMechanism(_Mechanism):
    """A μ-GDP mechanism (Dong, Roth & Su 2022, Def. 2.6)."""

    kind: Literal["gdp"]
    mu: float = Field(gt=0, allow_inf_nan=False, description="mu: the claim is the curve G_mu")

    def family(self) -> "TradeoffFamily":
        from privaudit.stats.tradeoff import GaussianFamily

        return GaussianFamily(self.mu)

    def dp_event(self) -> Any:  # μ-GDP is the Gaussian mechanism of σ = 1/μ (Dong, Roth & Su 2022, Thm. 2.7)
        from dp_accounting import dp_event

        return dp_event.GaussianDpEvent(1.0 / self.mu)

    def _pld(self, discretization: float) -> Any:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_gaussian_mechanism(1.0 / self.mu, value_discretization_interval=discretization)


class LaplaceMechanism(_Mechanism):
    """Laplace noise of scale ``scale`` × the L1 sensitivity: pure (1/scale)-DP."""

    kind: Literal["laplace"]
    scale: float = Field(gt=0, allow_inf_nan=False, description="Laplace scale b / L1 sensitivity")

    def family(self) -> "TradeoffFamily":
        from privaudit.stats.tradeoff import LaplaceFamily

        return LaplaceFamily(1.0 / self.scale)

    def dp_event(self) -> Any:
        from dp_accounting import dp_event

        return dp_event.LaplaceDpEvent(self.scale)

    def _pld(self, discretization: float) -> Any:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_laplace_mechanism(self.scale, value_discretization_interval=discretization)


class SubsampledGaussianMechanism(_Mechanism):
    """DP-SGD's mechanism: ``steps`` Poisson-subsampled (rate ``sample_rate``) Gaussian steps of noise
    multiplier ``noise_multiplier``, add/remove neighbourhood."""

    kind: Literal["subsampled_gaussian"]
    noise_multiplier: float = Field(gt=0, allow_inf_nan=False, description="sigma / clipping norm of each step")
    sample_rate: float = Field(gt=0, le=1, description="Poisson sampling rate q = batch size / n, n the Defender-set "
                               "size without canary rows")
    steps: int = Field(ge=1, description="T, the number of noisy steps of the release run")

    def family(self) -> "TradeoffFamily":
        from privaudit.stats.tradeoff import SubsampledGaussianFamily

        return SubsampledGaussianFamily(1.0 / self.noise_multiplier, sample_rate=self.sample_rate, steps=self.steps)

    def with_steps(self, steps: int) -> "SubsampledGaussianMechanism":
        """The same mechanism run for ``steps`` steps (a fit that stopped early, or ran on): a new event."""
        return SubsampledGaussianMechanism.model_validate({**self.model_dump(), "steps": steps})

    def dp_event(self) -> Any:
        from dp_accounting import dp_event

        step = dp_event.PoissonSampledDpEvent(self.sample_rate, dp_event.GaussianDpEvent(self.noise_multiplier))
        return dp_event.SelfComposedDpEvent(step, self.steps)

    def _pld(self, discretization: float) -> Any:
        from dp_accounting.pld import privacy_loss_distribution as pld

        one = pld.from_gaussian_mechanism(self.noise_multiplier, sampling_prob=self.sample_rate,
                                          value_discretization_interval=discretization)
        return one.self_compose(self.steps) if self.steps > 1 else one


class RandomizedResponseMechanism(_Mechanism):
    """k-ary randomized response: the true value with probability e^ε/(e^ε + k − 1)."""

    kind: Literal["randomized_response"]
    epsilon: float = Field(gt=0, allow_inf_nan=False, description="the randomized response's own epsilon")
    classes: int = Field(ge=2, description="k, the number of possible values")

    def family(self) -> "TradeoffFamily":
        from privaudit.stats.tradeoff import RandomizedResponseFamily

        return RandomizedResponseFamily(self.epsilon, self.classes)

    def noise_parameter(self) -> float:
        """dp_accounting's p (a uniform bucket w.p. p, the true one otherwise): 1 − p + p/k = e^ε/(e^ε + k − 1)
        gives p = k/(e^ε + k − 1)."""
        return self.classes / (math.exp(min(self.epsilon, 700.0)) + self.classes - 1)

    def dp_event(self) -> Any:
        from dp_accounting import dp_event

        return dp_event.RandomizedResponseDpEvent(self.noise_parameter(), self.classes)

    def _pld(self, discretization: float) -> Any:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_randomized_response(self.noise_parameter(), self.classes,
                                            value_discretization_interval=discretization)


DeclaredMechanism = Annotated[
    Union[GaussianMechanism, GdpMechanism, LaplaceMechanism, SubsampledGaussianMechanism,
          RandomizedResponseMechanism],
    Field(discriminator="kind"),
]
#: the ``mechanism.kind`` values
MECHANISM_KINDS: tuple[str, ...] = ("gaussian", "gdp", "laplace", "subsampled_gaussian", "randomized_response")


def parse_mechanism(raw: object) -> _Mechanism:
    """A declared mechanism from its JSON/YAML mapping (``info.json``'s ``claimed_mechanism``)."""
    from pydantic import TypeAdapter

    return TypeAdapter(DeclaredMechanism).validate_python(raw)  # type: ignore[return-value]


def check_against_claim(mechanism: _Mechanism, epsilon: float, delta: float, where: str = "mechanism") -> None:
    """Refuse a mechanism whose own ε at the claimed δ exceeds the claimed ε (it cannot carry the claim).

    Raises:
        ValueError: naming ``where``, both ε and the fix.
    """
    own = mechanism.epsilon_at(delta)
    if own > epsilon * (1.0 + 1e-9) + 1e-12:
        own_s = "infinite (no pure-DP guarantee)" if math.isinf(own) else f"{own:.6g}"
        raise ValueError(f"the declared {mechanism.kind} {where} has epsilon {own_s} at the claimed delta {delta:g}, above the "
                         f"claimed epsilon {epsilon:g}: declare the mechanism the trainer runs, or claim at least its "
                         f"epsilon")
