"""What the canary experiments read from the params, as one typed value passed to the library.

The canaries stage (and the Prefect trial flow) build a :class:`CanaryPlan` from the validated
params once (:meth:`CanaryPlan.of`); :mod:`privaudit.canaries.runner`, :mod:`.shards`,
:mod:`.sizes` and :mod:`.assembly` take it instead of the application's whole ``Params``, so
what decides a shard's numbers is visible in one place (and is exactly what the shard store's key
hashes: :func:`privaudit.canaries.shards.shard_dir`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from privaudit.defenders.specs import DefenderSpecBase

__all__ = ["CanaryPlan", "ComputeSettings", "Game3TrialSettings", "LidpTrialSettings", "ParamsWithCanaries"]


class Game3TrialSettings(Protocol):
    """What the canary experiments read of the ``game3`` params block (``privaudit.config.Game3Params``)."""

    canaries: int | Literal["auto"]
    runs: int
    tau_selection: str


class LidpTrialSettings(Protocol):
    """What the canary experiments read of the ``lidp`` params block (``privaudit.config.LidpParams``)."""

    trials: int
    canaries: int | Literal["auto"]
    null_canaries: int | Literal["auto"]
    canary_type: str
    neighbourhood: str
    clipbkd_alpha: float
    clipbkd_pool: int
    gradient_norm: float | None
    gradient_reference: int
    tau_selection: str
    tune_fraction: float

    def k_canaries(self) -> int: ...

    def m_null(self) -> int: ...


class ComputeSettings(Protocol):
    """What the canary experiments read of the ``compute`` params block (``privaudit.config.ComputeParams``)."""

    scheduler: str
    shard_trials: int
    block_trials: int
    n_jobs: int


class _Base(Protocol):
    seed: int
    device: str


class ParamsWithCanaries(Protocol):
    """The validated params as :meth:`CanaryPlan.of` reads them (``privaudit.config.Params``; canaries import no
    config: the stage glue hands the params in)."""

    base: _Base
    game3: Game3TrialSettings
    lidp: LidpTrialSettings
    compute: ComputeSettings

    def audited_defenders(self) -> Sequence[DefenderSpecBase]: ...


@dataclass(frozen=True)
class CanaryPlan:
    """The canary experiments of one run.

    Attributes:
        seed: ``base.seed`` (trial t of defender d draws from ``rng_for(seed, "canaries", exp, d, t)``).
        device: ``base.device`` as set (``auto``/``cpu``/``cuda``; part of the shard key).
        defenders: the audited defenders' specs, in params order (``canaries.defenders``).
        game3, lidp, compute: the ``game3``, ``lidp`` and ``compute`` params blocks.
    """

    seed: int
    device: str
    defenders: tuple[DefenderSpecBase, ...]
    game3: Game3TrialSettings
    lidp: LidpTrialSettings
    compute: ComputeSettings

    @classmethod
    def of(cls, params: ParamsWithCanaries) -> "CanaryPlan":
        return cls(seed=params.base.seed, device=params.base.device, defenders=tuple(params.audited_defenders()),
                   game3=params.game3, lidp=params.lidp, compute=params.compute)

    def defender(self, name: str) -> DefenderSpecBase:
        """The spec of audited defender ``name`` (ValueError naming ``canaries.defenders`` otherwise)."""
        for spec in self.defenders:
            if spec.name == name:
                return spec
        raise ValueError(f"defender {name!r} is not audited (canaries.defenders: {[s.name for s in self.defenders]})")
