"""What the canary experiments read from the params, as one typed value passed to the library.

The canaries stage (and the Prefect trial flow) build a :class:`CanaryPlan` from the validated
params once (:meth:`CanaryPlan.of`); :mod:`privaudit.canaries.runner`, :mod:`.shards`,
:mod:`.sizes` and :mod:`.assembly` take it instead of the application's whole ``Params``, so
what decides a shard's numbers is visible in one place (and is exactly what the shard store's key
hashes: :func:`privaudit.canaries.shards.shard_dir`).
"""

from __future__ import annotations

from dataclasses import dataclass

from privaudit.config import ComputeParams, Game3Params, LidpParams, Params
from privaudit.defenders.specs import DefenderSpecBase

__all__ = ["CanaryPlan"]


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
    game3: Game3Params
    lidp: LidpParams
    compute: ComputeParams

    @classmethod
    def of(cls, params: Params) -> "CanaryPlan":
        return cls(seed=params.base.seed, device=params.base.device, defenders=tuple(params.audited_defenders()),
                   game3=params.game3, lidp=params.lidp, compute=params.compute)

    def defender(self, name: str) -> DefenderSpecBase:
        """The spec of audited defender ``name`` (ValueError naming ``canaries.defenders`` otherwise)."""
        for spec in self.defenders:
            if spec.name == name:
                return spec
        raise ValueError(f"defender {name!r} is not audited (canaries.defenders: {[s.name for s in self.defenders]})")
