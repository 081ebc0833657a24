"""Typed models of the four metrics files and the one function that reads each.

``metrics/ltu.json``, ``metrics/audit.json``, ``metrics/bounds.json`` (the inputs of the release
gate and the report) and ``metrics/gate.json`` (its output) are read here, once, into frozen
pydantic models; the gate, the report, ``privaudit verdict`` and the Prefect flows use these
models and never look into the JSON themselves. The contracts are in docs/architecture.md
("Metrics contracts").

Typing, not meaning: a field the code reads has a type (a number is a JSON number, never a bool
or a string; a block is an object), and a value of the wrong type is a corrupt file, reported as
``ValueError`` naming the file and the dotted key (``metrics/ltu.json: ltu.mlp.privacy: ...``).
A value that is absent or null is ``None``: what that means (a missing result, no claim) is
decided by the gate and the report. Value ranges (probabilities in [0, 1], ε ≥ 0, ...) are the
GX suite's job (:func:`privaudit.validation.validate_metrics`, run on read with ``contract=True``).

Open-ended content, kept as extra keys and never read by the gate: the per-attacker diagnostics
of ``ltu.json`` (``auc``, ``tpr_at_*``, ``variant``, ``sample_risk``, ``not_applicable``, ...) and
the audit details of each ``audit.json`` block (``tau``, ``by_order``, ``checks``, ``grid``, ...).
Closed (unknown keys rejected): the entry level of ``audit.json`` and ``bounds.json``, the
``budget`` block, and ``gate.json`` except its ``provenance`` block (checked by
:func:`privaudit.repro.provenance.provenance_drift`).

Numbers keep their JSON type (an ``int`` stays an ``int``), so the report prints them as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictBool, ValidationError, model_validator

from privaudit.artifacts import read_json
from privaudit.claims.registry import block_audits
from privaudit.claims.claim import Neighbourhood, PrivacyClaim
from privaudit.claims.mechanisms import DeclaredMechanism

__all__ = [
    "MI_ACCURACY_BOUNDS",
    "RecordedClaim",
    "AttackerResult",
    "AuditEntry",
    "AuditMetrics",
    "BoundsEntry",
    "Budget",
    "DefenderLedger",
    "DefenderVerdict",
    "EpsilonBlock",
    "GateResult",
    "LedgerBlock",
    "LtuEntry",
    "LtuSummary",
    "DefenderSummary",
    "MetricsSummary",
    "parse_entries",
    "parse_entry",
    "parse_gate",
    "read_gate",
    "read_metrics",
    "read_summary",
]

#: Keys of a ``metrics/bounds.json`` entry that are upper bounds on membership-inference accuracy.
MI_ACCURACY_BOUNDS: tuple[str, ...] = ("thudi", "yeom", "erlingsson", "sablayrolles")


def _number(value: Any) -> int | float:
    """A JSON number as it is (int or float, NaN and ±inf included); a bool or a string is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a number or null")
    return value


#: a JSON number (its int/float type kept); never a bool or a numeric string
Number = Annotated[float, PlainValidator(_number)]


class _Open(BaseModel):
    """A block with open-ended content: unknown keys are kept as extras."""

    model_config = ConfigDict(frozen=True, extra="allow")


class _Closed(BaseModel):
    """A block with a fixed set of keys: an unknown key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- metrics/ltu.json


def _binomial_stderr(accuracy: float | None, rounds: float | None, scale: float) -> float | None:
    """``scale · sqrt(A(1-A)/N)``; ``None`` without a valid accuracy and a positive round count."""
    if accuracy is None or rounds is None or rounds <= 0 or not 0.0 <= accuracy <= 1.0:
        return None
    return scale * math.sqrt(accuracy * (1.0 - accuracy) / rounds)


class AttackerResult(_Open):
    """One attacker's LTU result (Pedersen et al. 2022, Eq. 1 and 2)."""

    attacker: str | None = None
    accuracy: Number | None = None
    privacy: Number | None = None
    privacy_stderr: Number | None = None
    rounds: Number | None = None
    utility: Number | None = None
    utility_stderr: Number | None = None

    def privacy_error(self) -> float | None:
        """``privacy_stderr``, or Eq. 1's ``2 sqrt(A(1-A)/N)`` from accuracy and rounds."""
        if self.privacy_stderr is not None:
            return self.privacy_stderr
        return _binomial_stderr(self.accuracy, self.rounds, 2.0)


class LtuEntry(AttackerResult):
    """One defender of ``metrics/ltu.json``: the strongest attacker's result at the top level,
    every attacker under ``attackers``."""

    attackers: dict[str, AttackerResult] = Field(default_factory=dict)

    @property
    def has_top_level_result(self) -> bool:
        """Whether the entry carries a top-level ``privacy`` key (null included)."""
        return "privacy" in self.model_fields_set

    def strongest_attacker(self) -> str | None:
        """The top-level ``attacker`` if given, else the attacker with the lowest finite privacy."""
        if self.attacker is not None:
            return self.attacker
        finite = [(r.privacy, name) for name, r in self.attackers.items()
                  if r.privacy is not None and math.isfinite(r.privacy)]
        return min(finite)[1] if finite else None

    def per_attacker(self) -> dict[str, AttackerResult]:
        """Results by attacker name for display: the top level (under the strongest attacker's name,
        or ``"strongest"``) first, then every other attacker."""
        out: dict[str, AttackerResult] = {}
        if self.has_top_level_result:
            out[self.strongest_attacker() or "strongest"] = self
        for name, result in self.attackers.items():
            out.setdefault(name, result)
        return out


# --------------------------------------------------------------------------- metrics/audit.json


class EpsilonBlock(_Open):
    """What every audit block of an ``audit.json`` entry records beside its ε lower bound."""

    delta: Number | None = None
    neighbourhood: str | None = None
    level: Number | None = None
    failed_checks: tuple[str, ...] | None = None
    threat_model: str | None = None


class Game3Block(EpsilonBlock):
    eps_low: Number | None = None
    eps_high: Number | None = None
    canaries: Number | None = None


class LidpBlock(EpsilonBlock):
    eps_lower_bound: Number | None = None
    eps_lower_bound_k1: Number | None = None
    trials: Number | None = None
    certified_trials: Number | None = None
    tuning_trials: Number | None = None
    canaries: Number | None = None
    order: Number | None = None
    method: str | None = None
    beta: Number | None = None


class WhiteboxBlock(EpsilonBlock):
    eps_lower_bound: Number | None = None
    assumption: str | None = None


class OneRunBlock(EpsilonBlock):
    eps_lower_bound: Number | None = None


class LastIterateCeilingBlock(_Open):
    """The last-iterate heuristic ceiling of a DP-SGD recipe (Steinke et al. 2024 §3) beside a black-box ε̂."""

    eps: Number
    eps_gdp: Number | None = None
    mu: Number | None = None
    method: str | None = None


class ReducedAuditBlock(_Open):
    """A black-box audit that ran fewer runs per side than the params' default (``blackbox.reduced`` of
    ``metrics/audit.json``, :func:`privaudit.audits.blackbox.reduced_note`)."""

    params_key: str
    runs_per_side: Number
    default_runs_per_side: Number
    detectable_epsilon: Number | None = None
    detectable_epsilon_default: Number | None = None

    def text(self) -> str:
        """The warning the verdict and the report's first screen show."""
        eps = ""
        if self.detectable_epsilon is not None:
            eps = f": it detects only eps >= {self.detectable_epsilon:.3g}"
            if self.detectable_epsilon_default is not None:
                eps += f" (at the default size: eps >= {self.detectable_epsilon_default:.3g})"
        return (f"smaller black-box audit: {self.runs_per_side:g} runs per side ({self.params_key}; default "
                f"{self.default_runs_per_side:g}){eps}")


class BlackboxBlock(EpsilonBlock):
    """The many-run black-box audit (:mod:`privaudit.audits.blackbox`): GDP view, assumption-free bound, ceiling."""

    eps_lower_bound: Number | None = None
    eps_lower_bound_rate: Number | None = None
    curve: str | None = None
    curve_description: str | None = None
    refutes_claimed_curve: StrictBool | None = None
    gdp_epsilon: Number | None = None
    gdp_warning: str | None = None
    assumption: str | None = None
    runs_in: Number | None = None
    runs_out: Number | None = None
    ceiling: LastIterateCeilingBlock | None = None
    reduced: ReducedAuditBlock | None = None


class Budget(_Closed):
    """The split of ``gate.beta`` over the bounds (:mod:`privaudit.claims.error_budget`)."""

    beta: Number
    gated: tuple[str, ...] = ()
    diagnostic: tuple[str, ...] = ()
    levels: dict[str, Number] = Field(default_factory=dict)


class RecordedClaim(BaseModel):
    """The ``claimed_epsilon``, ``claimed_delta`` and ``claimed_neighbourhood`` keys that a defender's
    ``info.json`` and its ``metrics/audit.json`` entry both carry (other keys ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    claimed_epsilon: Number | None = None
    claimed_delta: Number | None = None
    claimed_neighbourhood: Neighbourhood | None = None
    claimed_mechanism: DeclaredMechanism | None = None

    @property
    def claim(self) -> PrivacyClaim | None:
        """The DP claim; ``None`` when no finite ε is claimed (δ defaults to 0, the neighbourhood to
        ``add_remove``, the mechanism to none: the (ε, δ) point only)."""
        eps = self.claimed_epsilon
        if eps is None or not math.isfinite(eps):
            return None
        return PrivacyClaim(float(eps), float(self.claimed_delta or 0.0), self.claimed_neighbourhood or Neighbourhood.ADD_REMOVE,
                            self.claimed_mechanism)


class AuditEntry(RecordedClaim):
    """One defender of ``metrics/audit.json`` (:func:`privaudit.verdict.entry.assemble_entry`); a block is
    ``None`` when its audit did not run. Besides the keys below, only blocks of registered audits are
    accepted (:data:`privaudit.claims.registry.AUDITS`; those without a typed block class here are kept in
    ``other_blocks`` as :class:`EpsilonBlock`); any other key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    audited: StrictBool | None = None
    budget: Budget | None = None
    game3: Game3Block | None = None
    lidp: LidpBlock | None = None
    whitebox: WhiteboxBlock | None = None
    one_run: OneRunBlock | None = None
    blackbox: BlackboxBlock | None = None
    violations: tuple[str, ...] = ()
    violation: StrictBool | None = None
    #: audits that applied but could not run, each with its one-line reason (unusable scores)
    not_audited: dict[str, str] = Field(default_factory=dict)
    other_blocks: dict[str, EpsilonBlock | None] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _collect_registered_blocks(cls, data: Any) -> Any:
        """Blocks of registered audits without a field here go to ``other_blocks``; other keys stay (and fail)."""
        if not isinstance(data, Mapping):
            return data
        registered = {a.name for a in block_audits()} - set(cls.model_fields)
        other = {k: v for k, v in data.items() if k in registered}
        if not other:
            return data
        return {k: v for k, v in data.items() if k not in other} | {"other_blocks": other}

    def block(self, audit: str) -> EpsilonBlock | None:
        """The block of registered audit ``audit`` (``None``: absent or null)."""
        if audit in type(self).model_fields and audit != "other_blocks":
            return getattr(self, audit)
        return self.other_blocks.get(audit)

    def epsilon_lower_bounds(self) -> list[tuple[str, str, EpsilonBlock, float]]:
        """``(kind, source, block, ε)`` for every ε lower bound present (absent or null ones left out),
        in registry order (:data:`privaudit.claims.registry.AUDITS`: white-box, one-run, LiDP K = √n,
        LiDP K = 1, Game 3)."""
        found: list[tuple[str, str, EpsilonBlock, float]] = []
        for audit in block_audits():
            block = self.block(audit.name)
            if block is None:
                continue
            for bound in audit.bounds:
                eps = None if bound.epsilon_key is None else getattr(block, bound.epsilon_key, None)
                if eps is not None:
                    found.append((bound.kind, f"{audit.name}.{bound.epsilon_key}", block, float(_number(eps))))
        return found


# --------------------------------------------------------------------------- metrics/bounds.json


class BoundsEntry(_Closed):
    """One defender of ``metrics/bounds.json`` (``bounds.defender_bounds``)."""

    thudi: Number | None = None
    yeom: Number | None = None
    erlingsson: Number | None = None
    sablayrolles: Number | None = None
    mip_eta: Number | None = None
    empirical_accuracy: Number | None = None
    empirical_accuracy_stderr: Number | None = None
    p_member: Number | None = None
    exceeds_theory: StrictBool | None = None
    neighbourhood: str | None = None
    comparable: StrictBool | None = None
    compared_epsilon: Number | None = None
    delta: Number | None = None

    def accuracy_bounds(self) -> dict[str, float]:
        """The finite upper bounds on MI accuracy, ``{kind: bound}``: those of
        :data:`MI_ACCURACY_BOUNDS`, plus ``"izzo"`` = 1/2 + ``mip_eta`` (Izzo et al. 2023,
        Definition 1 with k = n/2: an η-MIP algorithm admits no attacker above 1/2 + η)."""
        values = {"thudi": self.thudi, "yeom": self.yeom, "erlingsson": self.erlingsson,
                  "sablayrolles": self.sablayrolles,
                  "izzo": None if self.mip_eta is None else 0.5 + self.mip_eta}
        return {kind: float(v) for kind, v in values.items() if v is not None and math.isfinite(v)}

    def accuracy_error(self, ltu: LtuEntry | None) -> float | None:
        """Standard error of ``empirical_accuracy``: ``empirical_accuracy_stderr`` if recorded,
        else the binomial ``sqrt(A(1-A)/N)`` with N the LTU rounds of the strongest attacker."""
        if self.empirical_accuracy_stderr is not None:
            return self.empirical_accuracy_stderr
        return _binomial_stderr(self.empirical_accuracy, ltu.rounds if ltu else None, 1.0)


# --------------------------------------------------------------------------- the three inputs


class AuditMetrics(BaseModel):
    """``metrics/ltu.json``, ``metrics/audit.json`` and ``metrics/bounds.json``, by defender."""

    model_config = ConfigDict(frozen=True)

    ltu: dict[str, LtuEntry] = Field(default_factory=dict)
    audit: dict[str, AuditEntry] = Field(default_factory=dict)
    bounds: dict[str, BoundsEntry] = Field(default_factory=dict)

    def defenders(self) -> list[str]:
        """Defender names over the three files, in first-seen order (ltu, audit, bounds)."""
        return list(dict.fromkeys([*self.ltu, *self.audit, *self.bounds]))

    @classmethod
    def parse(cls, ltu: Any, audit: Any, bounds: Any) -> AuditMetrics:
        """Type the three decoded JSON objects (``ValueError`` naming ``ltu.<defender>.<key>`` ...)."""
        return cls(ltu=parse_entries("ltu", ltu), audit=parse_entries("audit", audit),
                   bounds=parse_entries("bounds", bounds))


MetricsKind = Literal["ltu", "audit", "bounds"]
_ENTRY_TYPES: dict[str, type[BaseModel]] = {"ltu": LtuEntry, "audit": AuditEntry, "bounds": BoundsEntry}
_M = TypeVar("_M", bound=BaseModel)


def _message(where: str, err: ValidationError) -> str:
    """``where.key.sub: problem (got value)`` for the first few errors of ``err``."""
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(p) for p in (where, *e["loc"]))
        msg = e["msg"].removeprefix("Value error, ")
        got = "" if e["type"] == "missing" else f" (got {e['input']!r})"
        parts.append(f"{loc}: {msg}{got}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_entry(model: type[_M], entry: Any, where: str) -> _M:
    """Type one entry (or ``info.json``) as ``model``; ``ValueError`` naming ``<where>.<key>``."""
    try:
        return model.model_validate(entry)
    except ValidationError as err:
        raise ValueError(_message(where, err)) from None


def parse_entries(kind: MetricsKind, obj: Any, where: str | None = None) -> dict[str, Any]:
    """Type one decoded metrics object ``{defender: entry}`` of ``kind``.

    Raises:
        ValueError: ``obj`` is not an object, or an entry has a value of the wrong type; the message
            names ``<where or kind>.<defender>.<key>``.
    """
    where = where or kind
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: {kind} metrics must be an object, got {type(obj).__name__}")
    model = _ENTRY_TYPES[kind]
    return {str(name): parse_entry(model, entry, f"{where}.{name}") for name, entry in obj.items()}


def read_metrics(
    ltu: str | Path, audit: str | Path, bounds: str | Path, *, contract: bool = False, missing_ok: bool = False
) -> AuditMetrics:
    """Read ``metrics/ltu.json``, ``metrics/audit.json`` and ``metrics/bounds.json`` into typed entries.

    Args:
        ltu, audit, bounds: the three files.
        contract: also check each file against its GX contract (value ranges, required keys) before
            typing it, as the report stage does.
        missing_ok: read a missing file as one without defenders (the Prefect flows publish what there is).

    Raises:
        FileNotFoundError: a file is missing (named).
        ValueError: a file is not JSON, or a value has the wrong type; the message names the file and key.
        privaudit.validation.ValidationFailed: ``contract`` and a file breaks its contract.
    """
    return AuditMetrics(ltu=read_entries("ltu", ltu, contract=contract, missing_ok=missing_ok),
                        audit=read_entries("audit", audit, contract=contract, missing_ok=missing_ok),
                        bounds=read_entries("bounds", bounds, contract=contract, missing_ok=missing_ok))


def read_entries(kind: MetricsKind, path: str | Path, *, contract: bool = False,
                 missing_ok: bool = False) -> dict[str, Any]:
    """One metrics file of ``kind`` as ``{defender: typed entry}`` (see :func:`read_metrics` for the arguments)."""
    if missing_ok and not Path(path).exists():
        return {}
    raw = read_json(path)
    if contract:
        from privaudit.validation import validate_metrics

        validate_metrics(kind, raw)
    try:
        return parse_entries(kind, raw)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


# --------------------------------------------------------------------------- metrics/gate.json


class DefenderVerdict(_Closed):
    """One defender's gate result: it passes iff it has no reason."""

    passed: StrictBool
    reasons: tuple[str, ...]


class DefenderLedger(_Closed):
    """One candidate under ``gate.total_budget``: its claim composed with the earlier releases
    (``composed_epsilon`` at the budget's δ; null: unbounded, no DP claim) and whether that is within the budget."""

    composed_epsilon: Number | None = None
    within_budget: StrictBool


class LedgerBlock(_Closed):
    """``metrics/gate.json``'s ``ledger`` block (only with ``gate.total_budget`` set;
    :mod:`privaudit.verdict.total_budget`): the data set identity, the budget, the earlier releases of that
    identity composed (names, oldest first), what they spent together (``spent_epsilon``, composed ε at the
    budget's δ; null: unbounded or not composable) and what is left (``left_epsilon`` = budget ε − spent), and
    per defender its composition with them."""

    identity: str
    budget_epsilon: Number
    budget_delta: Number
    releases: tuple[str, ...] = ()
    spent_epsilon: Number | None = None
    left_epsilon: Number | None = None
    defenders: dict[str, DefenderLedger] = Field(default_factory=dict)


class GateResult(_Closed):
    """``metrics/gate.json``: the release gate's verdict (:func:`privaudit.verdict.gate.evaluate_gate`),
    with ``gate.total_budget`` its composition with the ledger of releases (``ledger``), and, once written by the report stage, its ``provenance`` (:mod:`privaudit.repro.provenance`).

    ``warnings`` (``"defender <name>: <text>"``) never change ``passed``: they say what a reader must
    know beside the verdict (e.g. a black-box GDP view above a claim that declares no mechanism). A
    gate without warnings writes no ``warnings`` key (the file keeps its older shape)."""

    passed: StrictBool
    reasons: tuple[str, ...]
    defenders: dict[str, DefenderVerdict]
    warnings: tuple[str, ...] = ()
    #: the composition with the ledger of releases (``gate.total_budget`` set), else ``None`` (no key written)
    ledger: LedgerBlock | None = None
    provenance: dict[str, Any] | None = None

    def unlisted_reasons(self) -> list[str]:
        """Top-level reasons that belong to no defender (e.g. "no defender found")."""
        listed = {r for v in self.defenders.values() for r in v.reasons}
        return [r for r in self.reasons if r not in listed]

    def to_json(self) -> dict[str, Any]:
        """The ``metrics/gate.json`` object (``warnings`` only when there is one, ``provenance`` only when present)."""
        data = self.model_dump(mode="json")
        if not self.warnings:
            del data["warnings"]
        if self.ledger is None:
            del data["ledger"]
        if self.provenance is None:
            del data["provenance"]
        return data


def parse_gate(obj: Any, where: str = "gate") -> GateResult:
    """Type a decoded ``metrics/gate.json`` object (``ValueError`` naming ``<where>.<key>``)."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where} must be an object, got {type(obj).__name__}")
    return parse_entry(GateResult, obj, where)


def read_gate(path: str | Path) -> GateResult:
    """Read ``metrics/gate.json``.

    Raises:
        ValueError: the file is missing, unreadable, not JSON, or not the gate shape (the message
            names the file and the key).
    """
    path = Path(path)
    try:
        raw = read_json(path)
    except FileNotFoundError:
        raise ValueError(f"gate file {path} does not exist; run the report stage first (dvc repro report)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"gate file {path} cannot be read: {exc}") from exc
    return parse_gate(raw, where=str(path))


# --------------------------------------------------------------------------- metrics/summary.json

#: a number that is absent/null or finite and ≥ 0 (an ε̂, a claimed ε)
_NonNegative = Annotated[Number, Field(ge=0)]
#: a number that is absent/null or in [0, 1] (a probability, LTU privacy/utility, a standard error)
_Unit = Annotated[Number, Field(ge=0, le=1)]


class LtuSummary(_Closed):
    """The strongest LTU attacker's headline numbers (the top level of a ``metrics/ltu.json`` entry)."""

    attacker: str | None = None
    privacy: _Unit | None = None
    privacy_stderr: _Unit | None = None
    utility: _Unit | None = None
    utility_stderr: _Unit | None = None


class DefenderSummary(_Closed):
    """One defender of ``metrics/summary.json``: the verdict and the numbers a reviewer compares.

    ``eps_hat`` is the best (largest) ε lower bound per threat model (``white_box``, ``black_box``),
    ``eps_hat_bound`` the bound that gave it (``whitebox``, ``one_run``, ``lidp``, ``game3``); each
    bound certifies its own neighbourhood and δ, which ``metrics/audit.json`` records.
    """

    passed: StrictBool
    reasons: Annotated[int, Field(ge=0)]
    claimed_epsilon: _NonNegative | None = None
    claimed_delta: _Unit | None = None
    claimed_delta_log10: Number | None = None
    claimed_neighbourhood: Neighbourhood | None = None
    eps_hat: dict[str, _NonNegative] = Field(default_factory=dict)
    eps_hat_bound: dict[str, str] = Field(default_factory=dict)
    eps_hat_neighbourhood: dict[str, str] | None = None
    ltu: LtuSummary | None = None


class MetricsSummary(_Closed):
    """``metrics/summary.json`` (:func:`privaudit.report.summary.build_summary`): the one metrics file
    ``dvc metrics diff`` shows; the details stay in ``metrics/{ltu,audit,bounds,gate}.json``."""

    passed: StrictBool
    defenders: dict[str, DefenderSummary]

    def to_json(self) -> dict[str, Any]:
        """The ``metrics/summary.json`` object (null values left out: DVC shows no row for them)."""
        return self.model_dump(mode="json", exclude_none=True)


def read_summary(path: str | Path) -> MetricsSummary:
    """Read ``metrics/summary.json`` (``ValueError`` naming the file and the key)."""
    raw = read_json(path)
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path} must be an object, got {type(raw).__name__}")
    return parse_entry(MetricsSummary, raw, str(path))
