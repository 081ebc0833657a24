"""The protocol every audit of the family follows: what it needs, what it returns.

An audit (one module of :mod:`privaudit.audits`, one line of :mod:`privaudit.claims.registry`)
exposes ``CITATION`` (the paper and equation its bound comes from, in one place) and
``SETTINGS`` (its own frozen settings type: the fields it reads of the params block its registry line
names, ``params.whitebox``, ``params.lidp``, …; :func:`settings_from` builds it once, in
:meth:`privaudit.audits.runner.AuditPlan.of`) and
``run(request: AuditRequest, inputs: AuditInputs, settings: SETTINGS) -> AuditBound``:

- :class:`AuditRequest` — what every audit needs about the defender: its validated spec, its claim,
  its **level** (its share of ``gate.beta``, planned once by :class:`privaudit.claims.error_budget.BudgetPlan`
  and handed in; no audit reads a β of its own), the δ used where the claim gives none, its seed
  and the device. :meth:`AuditRequest.delta` converts the claim's δ to the audit's neighbourhood;
  :meth:`AuditRequest.trainer` builds the defender's trainer for audits that retrain it.
- :class:`AuditInputs` — the data the stages hand in: the Defender set (trainer audits) or the
  canary statistics (canary audits); an audit that lacks its input says which one.
- :class:`AuditBound` — one typed result: the ε lower bound with its level, δ, neighbourhood,
  threat model and assumption, the assumption checks (a failed one refutes the claim as surely as a
  large ε) and the diagnostics; :meth:`AuditBound.block` is its ``metrics/audit.json`` block.

The per-defender loop is written once (:func:`privaudit.audits.runner.run_audit`); the stages and
the gate never name an audit. ``AuditRequest.level`` is the only error probability an audit
receives; inside a bound it may split it further (Game-3 τ grid, the white-box check families).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from privaudit.claims.claim import PrivacyClaim

from privaudit.defenders.specs import DefenderSpecBase
from privaudit.seeding import int_seed, rng_for

__all__ = ["EPS_UNBOUNDED", "PURE_DELTA", "Audit", "AuditBound", "AuditInputs", "AuditRequest", "DefenderData", "settings_from",
           "audit_delta", "finite_epsilon", "trainer_audit_workers"]

#: stands for ε̂ = +∞ in the metrics files (any claim is refuted): JSON has no infinity and the
#: metrics contract wants finite ε
EPS_UNBOUNDED = 1.0e6
#: δ used for a pure-ε claim where an audit needs δ > 0 (a bound at a larger δ is smaller, so the
#: bound stays valid for δ = 0)
PURE_DELTA = 1e-12


def finite_epsilon(x: float) -> tuple[float, bool]:
    """``(ε, unbounded)``: ε̂ as stored in the metrics files (+∞ and anything above it → :data:`EPS_UNBOUNDED`)."""
    return (EPS_UNBOUNDED, True) if not math.isfinite(x) or x > EPS_UNBOUNDED else (float(x), False)


def audit_delta(claim: PrivacyClaim | None, neighbourhood: str, default: float) -> float:
    """The δ an audit of ``neighbourhood`` must use to be compared with ``claim``.

    The claim's δ, converted to the audit's neighbourhood (group privacy); ``default``
    (``lidp.delta``, or 0 for Game 3) when there is no claim or the claim says nothing about that
    neighbourhood.
    """
    if claim is None:
        return default
    implied = claim.implied_for(neighbourhood)
    return default if implied is None else implied.delta


@dataclass(frozen=True)
class AuditRequest:
    """What an audit of one defender needs besides its data.

    Attributes:
        spec: the defender's validated spec (``Params.defenders``).
        claim: its claim from ``info.json`` (``None``: no ε claimed).
        level: the failure probability of this audit's bound(s): the defender's share of ``gate.beta``.
        default_delta: δ where the claim implies none for the audit's neighbourhood (``lidp.delta``).
        seed: ``base.seed``; an audit draws from its own stream (:meth:`rng`, :meth:`int_seed`).
        device: the training device of trainer audits.
    """

    spec: DefenderSpecBase
    claim: PrivacyClaim | None
    level: float
    default_delta: float
    seed: int
    device: str = "cpu"

    @property
    def name(self) -> str:
        return self.spec.name

    def delta(self, neighbourhood: str, default: float | None = None) -> float:
        """The δ of this audit's bound for ``neighbourhood`` (:func:`audit_delta`)."""
        return audit_delta(self.claim, neighbourhood, self.default_delta if default is None else default)

    def claim_for(self, neighbourhood: str) -> PrivacyClaim | None:
        """The claim implied for ``neighbourhood`` (``None``: no claim, or none for that neighbourhood)."""
        return None if self.claim is None else self.claim.implied_for(neighbourhood)

    def rng(self, audit: str) -> np.random.Generator:
        """The audit's random stream for this defender: ``rng_for(base.seed, audit, name)``."""
        return rng_for(self.seed, audit, self.name)

    def int_seed(self, audit: str) -> int:
        """The audit's integer seed for this defender: ``int_seed(base.seed, audit, name)``."""
        return int_seed(self.seed, audit, self.name)

    def trainer(self, n_classes: int) -> Callable[[], Any]:
        """A factory of fresh, untrained defenders of this spec (``make_defender``), for audits that retrain it."""
        from privaudit.defenders.registry import make_defender

        spec, device = self.spec, self.device
        return lambda: make_defender(spec, n_classes=n_classes, device=device)


@dataclass(frozen=True)
class DefenderData:
    """The Defender set the released model is trained on: features ``X``, labels ``y``, ``n_classes``."""

    X: np.ndarray
    y: np.ndarray
    n_classes: int


@dataclass(frozen=True)
class AuditInputs:
    """The data a stage hands to the audits; each audit reads the part its registry line names.

    Attributes:
        defender_data: the Defender set (``inputs: trainer`` audits).
        canaries_dir: ``data/canaries`` (``inputs: canaries`` audits read ``<name>/<audit>.npz``).
        defenders_dir: ``data/defenders`` (the white-box audit pools the release run recorded in
            ``<name>/release_watch.json``; ``None``: no release run to pool).
        workers: local worker processes a trainer audit may spread independent training runs over
            (``compute.n_jobs``; the white-box audit's runs); their numbers do not depend on it.
    """

    defender_data: DefenderData | None = None
    canaries_dir: Path | None = None
    defenders_dir: Path | None = None
    workers: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be an int >= 1 (compute.n_jobs), got {self.workers!r}")

    def need_defender_data(self, audit: str) -> DefenderData:
        if self.defender_data is None:
            raise ValueError(f"the {audit} audit retrains the defender: pass the Defender set (--features, --split)")
        return self.defender_data

    def need_canaries_dir(self, audit: str) -> Path:
        if self.canaries_dir is None:
            raise ValueError(f"the {audit} audit reads canary statistics: pass --canaries (data/canaries)")
        return self.canaries_dir


def trainer_audit_workers(device: str, n_jobs: int) -> int:
    """Workers a trainer audit's independent runs may use on ``device`` (``AuditInputs.workers``; the plan prices
    the same): ``n_jobs`` on the CPU, 1 on CUDA, where they stay in the stage's process (a forked child cannot use
    CUDA once its parent has touched it, and runs sharing one GPU were never measured). ``"auto"`` counts as the CPU
    (the plan before any fit was timed).

    >>> trainer_audit_workers("cpu", 4), trainer_audit_workers("cuda:0", 4), trainer_audit_workers("auto", 2)
    (4, 1, 2)
    """
    return 1 if str(device).startswith("cuda") else int(n_jobs)


@dataclass(frozen=True)
class AuditBound:
    """One audit's result for one defender: a typed bound and its ``metrics/audit.json`` block.

    Attributes:
        epsilon: the ε lower bound (+∞ kept as :data:`EPS_UNBOUNDED` in ``block``).
        level: the failure probability it was computed at (its share of ``gate.beta``).
        delta: the δ it certifies; ``neighbourhood``: the neighbourhood it certifies.
        threat_model: what the auditor saw; ``assumption``: what the bound assumes beyond the threat model.
        checks: assumption checks by name (``False``: failed; a failed check is a finding).
        diagnostics: the audit's other numbers (shown in the report, never gated).
        lines: one-line summaries for the stage log.
        table: a per-defender table the stage writes beside the block as ``<dir>/<defender>.csv``
            (LiDP: the ε̂-vs-trials curve); ``None``: none.
    """

    epsilon: float
    level: float
    delta: float
    neighbourhood: str
    threat_model: str
    assumption: str | None = None
    checks: Mapping[str, bool] = field(default_factory=dict)
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    lines: tuple[str, ...] = ()
    table: Any = None

    def block(self) -> dict[str, Any]:
        """The ``metrics/audit.json`` block: the diagnostics as recorded by the audit, which carry the
        bound's keys (ε, ``level``, ``delta``, ``neighbourhood``) in the audit's own names."""
        return dict(self.diagnostics)


_S = TypeVar("_S")


def settings_from(settings_type: type[_S], block: object) -> _S:
    """The audit settings ``settings_type`` (a frozen dataclass) read off a params ``block`` by field name.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class S:
    ...     runs: int
    >>> class Block:
    ...     runs, other = 2, "ignored"
    >>> settings_from(S, Block())
    S(runs=2)
    """
    missing = [f.name for f in fields(settings_type) if not hasattr(block, f.name)]  # type: ignore[arg-type]
    if missing:
        raise ValueError(f"{settings_type.__name__} reads {missing} from the params block "
                         f"{type(block).__name__}, which has no such key; add it to that block")
    return settings_type(**{f.name: getattr(block, f.name) for f in fields(settings_type)})  # type: ignore[arg-type]


class Audit(Protocol):
    """What an audit module exposes (checked for every registered module by the structure tests)."""

    #: the paper and equation the bound comes from, in one place
    CITATION: str
    #: the audit's own settings type: a frozen dataclass of the params it reads (:func:`settings_from`)
    SETTINGS: type

    def run(self, request: AuditRequest, inputs: AuditInputs, settings: Any) -> AuditBound: ...  # settings: SETTINGS
