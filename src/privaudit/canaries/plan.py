"""What the canary experiments read from the params, as one typed value passed to the library.

The canaries stage (and the Prefect trial flow) build a :class:`CanaryPlan` from the validated
params once (:meth:`CanaryPlan.of`); :mod:`privaudit.canaries.runner`, :mod:`.shards`,
:mod:`.sizes` and :mod:`.assembly` take it instead of the application's whole ``Params``, so
what decides a shard's numbers is visible in one place (and is exactly what the shard store's key
hashes: :func:`privaudit.canaries.shards.shard_dir`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

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
        user_code: ``(defender name, digest)`` of every audited ``kind: python`` defender: a hash of
            its :func:`privaudit.user_code.user_code_manifest` entry (target, loader and the local
            modules they import), so an edited trainer never reuses another trainer's shards.
    """

    seed: int
    device: str
    defenders: tuple[DefenderSpecBase, ...]
    game3: Game3Params
    lidp: LidpParams
    compute: ComputeParams
    user_code: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, params: Params, root: Path | None = None) -> "CanaryPlan":
        """The plan of ``params``; user trainer files are resolved against ``root`` (default: the working
        directory, where the stages import them from) and hashed (:mod:`privaudit.user_code`)."""
        from privaudit.artifacts import dumps_json
        from privaudit.user_code import user_code_manifest

        defenders = tuple(params.audited_defenders())
        python = [spec.model_dump(mode="json") for spec in defenders if spec.kind == "python"]
        manifest = user_code_manifest({"defenders": python}, Path.cwd() if root is None else Path(root))
        digests = {name: hashlib.sha256(dumps_json(entry).encode()).hexdigest() for name, entry in manifest.items()}
        return cls(seed=params.base.seed, device=params.base.device, defenders=defenders,
                   game3=params.game3, lidp=params.lidp, compute=params.compute,
                   user_code=tuple(sorted(digests.items())))

    def user_code_of(self, name: str) -> str | None:
        """The digest of defender ``name``'s own code (``None``: not a ``kind: python`` defender)."""
        return dict(self.user_code).get(name)

    def defender(self, name: str) -> DefenderSpecBase:
        """The spec of audited defender ``name`` (ValueError naming ``canaries.defenders`` otherwise)."""
        for spec in self.defenders:
            if spec.name == name:
                return spec
        raise ValueError(f"defender {name!r} is not audited (canaries.defenders: {[s.name for s in self.defenders]})")
