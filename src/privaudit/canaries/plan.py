"""What the canary experiments read from the params, as one typed value passed to the library.

The canaries stage (and the Prefect trial flow) build a :class:`CanaryPlan` from the validated
params once (:meth:`CanaryPlan.of`); :mod:`privaudit.canaries.runner`, :mod:`.shards`,
:mod:`.sizes` and :mod:`.assembly` take it instead of the application's whole ``Params``, so
what decides a shard's numbers is visible in one place (and is exactly what the shard store's key
hashes: :func:`privaudit.canaries.shards.shard_dir`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from privaudit.defenders.specs import BATCHED_KINDS, DefenderSpecBase

__all__ = ["BlackboxTrialSettings", "CanaryPlan", "ComputeSettings", "Game3TrialSettings", "LidpTrialSettings", "ParamsWithCanaries"]


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


class BlackboxTrialSettings(Protocol):
    """What the canary experiments read of the ``blackbox`` params block (``privaudit.config.BlackboxParams``)."""

    runs: int
    runs_no_claim: int
    sequential_runs: int
    block: int
    canary_scale: float | Literal["auto"]
    observable_runs: int

    def runs_per_side(self, *, batched: bool, claims_epsilon: bool, observable: bool = False) -> int: ...


class ComputeSettings(Protocol):
    """What the canary experiments read of the ``compute`` params block (``privaudit.config.ComputeParams``)."""

    scheduler: str
    shard_trials: int
    block_trials: int
    n_jobs: int | Literal["auto"]

    def workers(self) -> int: ...


class _Base(Protocol):
    seed: int
    device: str


class ParamsWithCanaries(Protocol):
    """The validated params as :meth:`CanaryPlan.of` reads them (``privaudit.config.Params``; canaries import no
    config: the stage glue hands the params in)."""

    base: _Base
    game3: Game3TrialSettings
    lidp: LidpTrialSettings
    blackbox: BlackboxTrialSettings
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
        blackbox: the ``blackbox`` params block (the many-run black-box audit's runs); ``None``: no
            black-box runs (a plan built by hand for Game 3 / LiDP only).
        user_code: ``(defender name, digest)`` of every audited ``kind: python`` defender: a hash of
            its :func:`privaudit.repro.user_code.user_code_manifest` entry (target, loader and the local
            modules they import), so an edited trainer never reuses another trainer's shards.
        sized_runs: ``(defender name, runs per side)`` of the black-box runs the plan stage wrote
            (``data/plan/sizes.json``, from the params only: :mod:`privaudit.planning.cost`); a defender not
            listed runs what its params ask.
        fits_in_shard_workers: set on the copy handed to local shard workers (``compute.n_jobs`` > 1 runs
            whole shards in parallel, so the fits inside one shard run one after the other there).
    """

    seed: int
    device: str
    defenders: tuple[DefenderSpecBase, ...]
    game3: Game3TrialSettings
    lidp: LidpTrialSettings
    compute: ComputeSettings
    user_code: tuple[tuple[str, str], ...] = ()
    blackbox: BlackboxTrialSettings | None = None
    fits_in_shard_workers: bool = False
    sized_runs: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, params: ParamsWithCanaries, root: Path | None = None,
           sized_runs: Mapping[str, int] | None = None) -> "CanaryPlan":
        """The plan of ``params``; user trainer files are resolved against ``root`` (default: the working
        directory, where the stages import them from) and hashed (:mod:`privaudit.repro.user_code`);
        ``sized_runs``: black-box runs per side sized by the plan stage (``data/plan/sizes.json``)."""
        from privaudit.repro.user_code import user_code_digests

        defenders = tuple(params.audited_defenders())
        digests = user_code_digests([spec.model_dump(mode="json") for spec in defenders],
                                    Path.cwd() if root is None else Path(root))
        return cls(seed=params.base.seed, device=params.base.device, defenders=defenders,
                   game3=params.game3, lidp=params.lidp, compute=params.compute,
                   user_code=tuple(sorted(digests.items())), blackbox=params.blackbox,
                   sized_runs=tuple(sorted((sized_runs or {}).items())))

    def user_code_of(self, name: str) -> str | None:
        """The digest of defender ``name``'s own code (``None``: not a ``kind: python`` defender)."""
        return dict(self.user_code).get(name)

    def blackbox_runs(self, name: str) -> int:
        """Models per side (with / without the canary) of defender ``name``'s black-box runs (0: none planned)."""
        if self.blackbox is None:
            return 0
        spec = self.defender(name)
        asked = self.blackbox.runs_per_side(batched=spec.kind in BATCHED_KINDS, claims_epsilon=spec.claims_epsilon(),
                                            observable=spec.observable_training())
        return min(asked, dict(self.sized_runs).get(name, asked))

    def blackbox_block(self, name: str) -> int:
        """Trials of one black-box block of defender ``name``: ``blackbox.block`` models trained together
        (batched trainer), else ``compute.block_trials`` rounded up to even (sequential fits; an in/out
        pair never straddles two blocks)."""
        if self.blackbox is None:
            raise ValueError("the plan has no blackbox settings (CanaryPlan.blackbox is None)")
        if self.defender(name).kind in BATCHED_KINDS:
            return int(self.blackbox.block)
        block = int(self.compute.block_trials)
        return block + block % 2

    def trials(self, experiment: str, name: str) -> int:
        """Trials of ``experiment`` for defender ``name``: Game-3 runs, LiDP trials, or 2 × black-box runs
        per side (black-box trial t carries the canary iff t is even)."""
        if experiment == "game3":
            return int(self.game3.runs)
        if experiment == "lidp":
            return int(self.lidp.trials)
        if experiment == "blackbox":
            return 2 * self.blackbox_runs(name)
        raise ValueError(f"experiment must be game3, lidp or blackbox, got {experiment!r}")

    def defender(self, name: str) -> DefenderSpecBase:
        """The spec of audited defender ``name`` (ValueError naming ``canaries.defenders`` otherwise)."""
        for spec in self.defenders:
            if spec.name == name:
                return spec
        raise ValueError(f"defender {name!r} is not audited (canaries.defenders: {[s.name for s in self.defenders]})")
