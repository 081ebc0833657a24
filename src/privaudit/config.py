"""Typed, validated ``params.yaml``.

Every knob a user turns lives in ``params.yaml``; this module turns it into pydantic models
that reject unknown keys and out-of-range values *before* any work starts, with a message
that names the offending key (``lidp.trials``, ``defenders[1].epsilon``) and what is allowed.

Defender entries are validated once, by the spec model of their ``kind``
(:mod:`privaudit.defenders.specs`), and kept as those typed objects: ``Params.defenders`` is a
list of :class:`~privaudit.defenders.specs.DefenderSpecBase` subclasses that dump back to the
same mapping. Loading params imports no trainer (no torch, scikit-learn, skops or pandas).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from privaudit.defenders.specs import DefenderSpecBase, refuse_bool_numbers, validate_defender_spec
from privaudit.claims.error_budget import DEFAULT_GATED, BudgetPlan, ErrorBudget, applicable_bounds, check_bound_kinds, plan_budget
from privaudit.messages import MAX_VALUE_CHARS, cap


class ParamsError(ValueError):
    """``params.yaml`` is missing, malformed, or has a bad key/value; the message names it."""


def available_cores() -> int:
    """CPU cores this process may run on: ``os.sched_getaffinity`` (honours taskset and container CPU sets),
    ``os.cpu_count()`` where the platform has no affinity call. What ``n_jobs: auto`` resolves to."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    numbers_are_not_booleans = field_validator("*", mode="before")(classmethod(refuse_bool_numbers))


class BaseParams(_Strict):
    seed: int = Field(2026, ge=0, description="root seed; every generator is spawned from it")
    device: Literal["auto", "cpu", "cuda"] = "auto"


#: what ``dataset.path`` must point to, per data set that needs one (the fix named by the error)
_PATH_HINT = {
    "csv": "your CSV file (comma-separated with a header row; .tsv/.tab files tab-separated)",
    "location": "the Location data set's .tgz",
    "imagefolder": "a folder holding one sub-folder of images per class",
}


#: the data sources read from ``dataset.path``: their default identity names the path too
FILE_SOURCES = frozenset({"location", "csv", "imagefolder"})


class DatasetParams(_Strict):
    name: str = "digits"
    path: str | None = None
    label_column: str | None = None
    max_samples: int | None = Field(None, ge=2)
    identity: str | None = Field(None, min_length=1, description=(
        "The people in the data set: releases with the same identity are composed against gate.total_budget "
        "(releases.yaml). Null: the data source (dataset.name, and dataset.path for csv, location and imagefolder). "
        "Keep it when the data grows or is corrected (still the same people); change it only for other people."))

    def data_identity(self) -> str:
        """``dataset.identity``, or the data source when null: ``dataset.name`` (``<name>:<path>`` for the sources read
        from ``dataset.path``), the name the release ledger groups releases by."""
        if self.identity is not None:
            return self.identity
        if self.name in FILE_SOURCES and self.path:  # ``./data/x.csv`` and ``data/x.csv``: one identity
            return f"{self.name}:{os.path.normpath(str(self.path))}"
        return self.name

    @field_validator("name")
    @classmethod
    def _known_name(cls, v: str) -> str:
        allowed = {"digits", "mnist5k", "location", "csv", "imagefolder"}
        if v in allowed or (v.startswith("torchvision:") and len(v) > len("torchvision:")):
            return v
        raise ValueError(
            f"unknown data set {cap(repr(v), MAX_VALUE_CHARS)}; allowed: {sorted(allowed)} or 'torchvision:<Name>'"
        )

    @model_validator(mode="after")
    def _path_when_needed(self) -> "DatasetParams":
        if self.name in {"location", "csv", "imagefolder"} and not self.path:
            raise ValueError(
                f"dataset.path is required when dataset.name is {self.name!r} (got {self.path!r}): set it to "
                f"{_PATH_HINT[self.name]}, best under data/external/ so that DVC sees it change"
            )
        if self.name == "csv" and not self.label_column:
            raise ValueError(
                f"dataset.label_column is required when dataset.name is 'csv' (got {self.label_column!r}): "
                "set it to the name of the CSV column that holds the labels"
            )
        return self


class SplitParams(_Strict):
    defender_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    fraction_tolerance: float = Field(0.02, gt=0.0, lt=0.5)


class FeaturizeParams(_Strict):
    backbone: str = "identity"
    batch_size: int = Field(64, ge=1)
    image_size: int | None = Field(None, ge=8)

    @field_validator("backbone")
    @classmethod
    def _known_backbone(cls, v: str) -> str:
        if v in {"identity", "efficientnet_lite0"} or (
            v.startswith("torchvision:") and len(v) > len("torchvision:")
        ):
            return v
        raise ValueError(
            f"unknown backbone {cap(repr(v), MAX_VALUE_CHARS)}; allowed: 'identity', 'efficientnet_lite0', 'torchvision:<model>'"
        )


#: the names ``ltu.attackers`` may list; :data:`privaudit.attacks.ltu_attackers.ATTACKERS` builds them
ATTACKER_NAMES: tuple[str, ...] = (
    "loss_gap", "score_loss", "score_confidence", "score_entropy", "score_margin", "score_best", "bounded_loss",
    "learned", "retrain", "gradient", "lira", "rmia",
)


def check_attacker_names(names: list[str]) -> None:
    """Raise ValueError naming ``ltu.attackers`` and the unknown entry."""
    for n in names:
        if n not in ATTACKER_NAMES:
            raise ValueError(f"ltu.attackers: unknown attacker {cap(repr(n), MAX_VALUE_CHARS)}; allowed: {sorted(ATTACKER_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"ltu.attackers lists an attacker twice: {names}")


class LtuParams(_Strict):
    rounds: int = Field(1000, ge=1)
    attackers: list[str] = Field(
        default_factory=lambda: ["loss_gap", "score_best", "bounded_loss", "learned", "gradient", "lira", "rmia"],
        min_length=1)
    n_jobs: Annotated[int, Field(ge=-1)] | Literal["auto"] = Field(
        "auto", description="joblib workers for retrain / reference-model trainings of sequential kinds (-1 or auto: "
        "the cores this process may use)")
    reference_models: int = Field(8, ge=1, description="reference models of lira / rmia (trained on Reserved data)")
    reference_fraction: float = Field(0.5, gt=0.0, le=1.0, description="share of D_R per reference model")
    learned_mode: Literal["exact", "one_split"] = "one_split"
    rmia_a: float = Field(0.33, ge=0.0, le=1.0, description="RMIA offline Pr(x) interpolation a")
    rmia_gamma: float = Field(1.0, gt=0.0, description="RMIA likelihood-ratio threshold gamma")
    risk_reference_models: int = Field(
        32, ge=0, description="reference models of the per-sample risk (population subsets of the Defender "
        "size; 0 = off, else >= 4)")
    risk_level: float = Field(0.05, gt=0.0, lt=1.0, description="FDR (bh) or family-wise (bonferroni) level of "
                              "the most-exposed flag")
    risk_correction: Literal["bh", "bonferroni"] = Field("bh", description="multiplicity correction over the "
                                                          "tested Defender samples")

    @field_validator("attackers")
    @classmethod
    def _known_attackers(cls, v: list[str]) -> list[str]:
        check_attacker_names(v)
        return v

    @field_validator("n_jobs")
    @classmethod
    def _nonzero_jobs(cls, v: int | str) -> int | str:
        if v == 0:
            raise ValueError("must be >= 1, -1 or 'auto' (the cores this process may use), got 0")
        return v

    def workers(self) -> int:
        """``n_jobs`` as a worker count: ``auto`` and -1 resolve to :func:`available_cores`."""
        return available_cores() if self.n_jobs in ("auto", -1) else int(self.n_jobs)

    @field_validator("risk_reference_models")
    @classmethod
    def _enough_references(cls, v: int) -> int:
        if 0 < v < 4:
            raise ValueError(f"must be 0 (off) or >= 4, got {v}")
        return v


class CanaryParams(_Strict):
    defenders: list[str] | Literal["all"] = "all"


class ComputeParams(_Strict):
    """Where and in what pieces the canary trials run (privaudit.canaries.shards)."""

    scheduler: str = Field("local", description="local | a Dask scheduler address (tcp://host:8786)")
    shard_trials: int = Field(32, ge=1, description="trials per shard (rounded up to whole blocks)")
    block_trials: int = Field(16, ge=1, description="trials trained in one batched call (randomness unit)")
    n_jobs: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="local worker processes running canary shards (auto: the cores this process may use, "
        "os.sched_getaffinity); the numbers are the same for any count")
    prune_shards: bool = Field(True, description="after a successful canaries stage, delete stored shards "
                               "of other params/code (the DVC cache keeps their assembled outputs)")
    budget_minutes: float | None = Field(
        30.0, gt=0, description="wall-clock budget of the audit stages (privaudit.planning.cost): a guard, never a "
        "resizer: over it the plan stage stops, naming a smaller audit and the command; null: no budget")

    def workers(self) -> int:
        """``n_jobs`` as a worker count: ``auto`` resolves to :func:`available_cores`."""
        return available_cores() if self.n_jobs == "auto" else int(self.n_jobs)


class Game3Params(_Strict):
    canaries: int | Literal["auto"] = Field(
        "auto", description="Game-3 canaries per run (distinct Defender samples); auto = min(1000, n_defender // 4), "
        "resolved and checked against the data by the split stage (privaudit.canaries.sizes)")
    tau_min: float = Field(0.5, ge=0.0, lt=1.0)
    tau_max: float = Field(0.99, gt=0.0, le=1.0)
    tau_steps: int = Field(10, ge=1)
    runs: int = Field(1, ge=1, description="training runs of game3.canaries each (Table 5: 1x1000 vs 10x100)")
    tau_selection: Literal["bonferroni", "split"] = "bonferroni"

    @field_validator("canaries")
    @classmethod
    def _enough_canaries(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 2:
            raise ValueError(f"must be >= 2 or 'auto', got {v}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _no_alpha(cls, data: Any) -> Any:
        if isinstance(data, dict) and "alpha" in data:
            raise ValueError("game3.alpha was replaced by the error budget gate.beta (Game 3 gets its share); "
                             "remove game3.alpha from params.yaml")
        return data

    @model_validator(mode="after")
    def _tau_range(self) -> "Game3Params":
        if self.tau_min > self.tau_max:
            raise ValueError(f"game3.tau_min ({self.tau_min}) must not exceed game3.tau_max ({self.tau_max})")
        return self


class LidpParams(_Strict):
    trials: int = Field(32, ge=2)
    canaries: int | Literal["auto"] = "auto"
    null_canaries: int | Literal["auto"] = "auto"
    canary_type: Literal["mislabel", "clipbkd", "random_gradient"] = "mislabel"
    neighbourhood: Literal["add_remove", "replace_one"] = "add_remove"
    clipbkd_alpha: float = Field(10.0, gt=0.0, description="scale alpha of the tail singular vectors")
    clipbkd_pool: int = Field(0, ge=0, description="p tail singular vectors (0: min(n, d) // 4)")
    gradient_norm: float | None = Field(None, gt=0.0, description="norm of random-gradient canaries (null: the clip norm, else 1)")
    gradient_reference: int = Field(
        16, ge=0, description="canary-free reference heads whose mean displacement is subtracted from "
        "random-gradient statistics (0: off, the plain <c, theta_T - theta_0>)")
    tau_selection: Literal["split", "bonferroni"] = "split"
    order: Literal[1, 2, 4] = 1
    method: Literal["wilson", "bernstein"] = "wilson"
    delta: float = Field(1e-5, ge=0.0, lt=1.0)
    tune_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    pilot_fraction: float = Field(
        0.125, gt=0.0, lt=1.0, description="tau_selection: bonferroni only: share of the trials (at least 1) that "
        "only build the threshold grid and are not certified")
    tau_quantiles: int = Field(16, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _no_beta(cls, data: Any) -> Any:
        if isinstance(data, dict) and "beta" in data:
            raise ValueError("lidp.beta was removed: set gate.beta (the one error budget; the LiDP audit gets its "
                             "share, and `python -m stages.lidp --self-check` runs at gate.beta or --level); "
                             "remove lidp.beta from params.yaml")
        return data

    @field_validator("canaries", "null_canaries")
    @classmethod
    def _positive(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"must be >= 1 or 'auto', got {v}")
        return v

    def k_canaries(self) -> int:
        """K: ``round(sqrt(trials))`` when ``lidp.canaries`` is ``auto`` (LiDP §5)."""
        return max(1, round(self.trials**0.5)) if self.canaries == "auto" else int(self.canaries)

    def m_null(self) -> int:
        """m null canaries per trial; ``auto`` = K."""
        return self.k_canaries() if self.null_canaries == "auto" else int(self.null_canaries)


class WhiteboxParams(_Strict):
    """White-box DP-SGD audit (privaudit.audits.whitebox) of defenders whose training can be watched."""

    runs: int = Field(2, ge=1, description="recorded training runs, pooled (more runs: tighter eps-hat)")
    canary_scale: float = Field(4.0, gt=1.0, description="raw norm of the gradient canary in units of the clip norm C")


class OneRunParams(_Strict):
    """One-run black-box audit (privaudit.audits.one_run, Steinke et al. 2023) of every defender."""

    canaries: int | Literal["auto"] = Field("auto", description="input-space canary rows m (auto: one per "
                                                                  "tail direction x label, 100..1000)")

    @field_validator("canaries")
    @classmethod
    def _enough(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 10:
            raise ValueError(f"must be >= 10 or 'auto', got {v}")
        return v


class BlackboxParams(_Strict):
    """Many-run black-box audit (privaudit.audits.blackbox) of every audited defender: final models only.

    Each run trains the recipe on the Defender set with (``in``) or without (``out``) one crafted canary
    (privaudit.canaries.crafted); the runs go through the canaries stage's shards (resumable, Dask)."""

    runs: int = Field(2000, ge=8, description="models per side (with / without the canary) for a defender with a "
                                              "batched trainer (dp_sgd, torch_mlp) that claims an epsilon")
    sequential_runs: int = Field(320, ge=8, description="models per side for any other trainer that claims an "
                                                        "epsilon (kind: python, pate): one fit per run, in shards")
    runs_no_claim: int = Field(32, ge=8, description="models per side for a defender without a DP claim, any "
                                                     "trainer (its eps-hat is evidence of leakage; nothing to refute)")
    observable_runs: int = Field(64, ge=8, description="models per side for an observable defender that privaudit "
                                 "cannot batch (kind: python, observable: true): a cross-check of the white-box audit, "
                                 "which sees every step and bounds eps far tighter")
    block: int = Field(1000, ge=2, description="models trained together in one batched call (even; the unit of "
                                               "training randomness)")
    tune_fraction: float = Field(0.2, gt=0.0, lt=1.0, description="share of each side's runs that only chooses "
                                                                  "the threshold; the rest certifies it")
    canary_scale: float | Literal["auto"] = Field("auto", description="s of the canary base + s v (auto: the "
                                                                      "clip-aware scale, 3 for 10 classes, C = 1)")

    @field_validator("block")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError(f"must be even (half the models of a block carry the canary), got {v}")
        return v

    @field_validator("canary_scale")
    @classmethod
    def _scale(cls, v: float | str) -> float | str:
        if not isinstance(v, str) and not (0.0 < float(v) < 1e6):
            raise ValueError(f"must be 'auto' or a number in (0, 1e6), got {v}")
        return v

    def runs_per_side(self, *, batched: bool, claims_epsilon: bool, observable: bool = False) -> int:
        """Models per side for a defender: ``runs_no_claim`` without a DP claim; with one, ``runs`` (batched
        trainer), ``observable_runs`` (an observable trainer privaudit cannot batch: the white-box audit is
        its main evidence) or ``sequential_runs`` (one fit per run)."""
        if not claims_epsilon:
            return int(self.runs_no_claim)
        if batched:
            return int(self.runs)
        return int(self.observable_runs if observable else self.sequential_runs)

    @property
    def default_runs(self) -> dict[str, int]:
        """The code's default of each runs-per-side key (``blackbox.<key>``): what a smaller audit is measured
        against (:func:`privaudit.audits.blackbox.reduced_note`)."""
        return {k: int(type(self).model_fields[k].default)
                for k in ("runs", "sequential_runs", "runs_no_claim", "observable_runs")}


class BoundsParams(_Strict):
    p_member: float = Field(0.5, gt=0.0, lt=1.0)


class ReportParams(_Strict):
    title: str = "privaudit release audit"
    most_exposed: int = Field(10, ge=0, description="Sample ids listed per defender as most exposed; 0 lists none.")
    #: CSVs of the LTU Table 1 reproduction (benchmarks/ltu_table1.py) shown in the report, one per
    #: data set (a single path is accepted), or null / [] for none
    table1: list[str] | None = None
    #: show the tables of report.table1 that belong to another data set than dataset.name too (by
    #: default a table1_<name>.csv is shown only on an audit of data set <name>)
    table1_other_datasets: bool = False

    @field_validator("table1", mode="before")
    @classmethod
    def _table1_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class TotalBudget(_Strict):
    """``gate.total_budget``: the (ε, δ) every release of one data set identity may spend together."""

    epsilon: float = Field(gt=0.0, allow_inf_nan=False, description="Total ε of all releases of one data set identity.")
    delta: float = Field(ge=0.0, lt=1.0, description="The δ at which the composed ε is compared with the total ε.")


class GateParams(_Strict):
    """Thresholds and error budget of the release gate (``gate.*`` in ``params.yaml``)."""

    min_privacy: float = Field(0.2, ge=0.0, le=1.0, description="Minimum LTU privacy (Eq. 1) of the strongest attacker.")
    min_utility: float = Field(0.5, ge=0.0, le=1.0, description="Minimum LTU utility (Eq. 2).")
    max_epsilon_excess: float = Field(
        0.0, ge=0.0, description="Allowed audited ε lower bound minus claimed ε before it is a violation.")
    fail_on_theory_violation: bool = Field(
        True, description="Fail when the empirical attack accuracy exceeds a theoretical upper bound.")
    use_error_bars: bool = Field(
        True, description="Compare pessimistic bounds (privacy - stderr, utility - stderr; accuracy - z stderr "
                          "for theory violations) instead of point estimates.")
    beta: float = Field(0.05, gt=0.0, lt=1.0, description=(
        "Error budget: probability that the gate reports a violation of a DP claim that holds, split "
        "equally (Bonferroni) over the gated bounds that apply to a defender (privaudit.claims.error_budget)."))
    bounds: list[str] = Field(default_factory=lambda: list(DEFAULT_GATED), description=(
        "Bounds compared with the claim (whitebox, one_run, blackbox, blackbox_rate, lidp, lidp_k1, game3, "
        "theory); the others "
        "are computed and shown as diagnostic, not gated."))
    total_budget: TotalBudget | None = Field(None, description=(
        "Privacy budget over releases (releases.yaml): every earlier release of the same dataset.identity is composed "
        "with each claiming defender, which fails when the composed ε at this δ exceeds this ε. Null: no budget."))

    @field_validator("bounds")
    @classmethod
    def _known_bounds(cls, v: list[str]) -> list[str]:
        check_bound_kinds(v)
        return v


class Params(_Strict):
    base: BaseParams = BaseParams()
    dataset: DatasetParams = DatasetParams()
    split: SplitParams = SplitParams()
    featurize: FeaturizeParams = FeaturizeParams()
    defenders: list[SerializeAsAny[DefenderSpecBase]] = Field(min_length=1)
    ltu: LtuParams = LtuParams()
    canaries: CanaryParams = CanaryParams()
    compute: ComputeParams = ComputeParams()
    game3: Game3Params = Game3Params()
    lidp: LidpParams = LidpParams()
    whitebox: WhiteboxParams = WhiteboxParams()
    one_run: OneRunParams = OneRunParams()
    blackbox: BlackboxParams = BlackboxParams()
    bounds: BoundsParams = BoundsParams()
    report: ReportParams = ReportParams()
    gate: GateParams = GateParams()

    @field_validator("defenders", mode="before")
    @classmethod
    def _validate_defenders(cls, v: Any) -> Any:
        """Each entry by its kind's spec model (the one validation); names unique."""
        if not isinstance(v, list):
            return v  # pydantic reports the type
        names: set[str] = set()
        out = []
        for i, raw in enumerate(v):
            spec = raw if isinstance(raw, DefenderSpecBase) else validate_defender_spec(raw, where=f"defenders[{i}]")
            if spec.name in names:
                raise ValueError(f"defenders[{i}].name {spec.name!r} is used twice; names must be unique")
            names.add(spec.name)
            out.append(spec)
        return out

    @model_validator(mode="after")
    def _canary_defenders_exist(self) -> "Params":
        if self.canaries.defenders != "all":
            known = {d.name for d in self.defenders}
            for name in self.canaries.defenders:
                if name not in known:
                    raise ValueError(
                        f"canaries.defenders names {cap(repr(name), MAX_VALUE_CHARS)}, which is not in defenders: {sorted(known)}"
                    )
        return self

    def defender(self, name: str) -> DefenderSpecBase:
        """The validated spec of the defender called ``name``."""
        for d in self.defenders:
            if d.name == name:
                return d
        raise ParamsError(f"no defender named {name!r} in params.defenders")

    def error_budget(self, name: str) -> ErrorBudget:
        """The split of ``gate.beta`` over the bounds of defender ``name`` (from params alone)."""
        spec = self.defender(name)
        audited = any(d.name == name for d in self.audited_defenders())
        applicable = applicable_bounds(observable=spec.observable_training(), canary_audited=audited,
                                       theory=self.gate.fail_on_theory_violation)
        return plan_budget(self.gate.beta, self.gate.bounds, applicable)

    def budget_plan(self) -> BudgetPlan:
        """Every defender's error budget, planned once from params (:class:`privaudit.claims.error_budget.BudgetPlan`);
        the stages hand each audit its ``level`` from this plan."""
        return BudgetPlan(self.gate.beta, {d.name: self.error_budget(d.name) for d in self.defenders})

    def audited_defenders(self) -> list[DefenderSpecBase]:
        """Defenders that get canary audits (``canaries.defenders``)."""
        if self.canaries.defenders == "all":
            return list(self.defenders)
        return [self.defender(n) for n in self.canaries.defenders]


def _format_validation_error(err: ValidationError) -> str:
    """One line: ``invalid params: <key>: <what is allowed> (got <value>)``, problems joined by ``; ``, capped.

    A validator's own message that already names a deeper key (``defenders[2].epsilon: …``,
    ``dataset.path is required …``) is kept as it is, without the enclosing block's whole value.
    """
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in e["loc"]).replace(".[", "[")
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see params.yaml in the repository for all keys)"
        if loc and msg.startswith(tuple(loc + end for end in ".[:= ")):
            lines.append(msg)
            continue
        quoted = e["type"] not in {"extra_forbidden", "missing"} and not isinstance(e.get("input"), dict)
        lines.append(f"{loc or '<root>'}: {msg}" + (f" (got {cap(repr(e['input']), MAX_VALUE_CHARS)})" if quoted else ""))
    head = "invalid params: " if len(lines) == 1 else f"invalid params ({len(lines)} problems): "
    return cap(head + "; ".join(lines))


def parse_params(raw: dict[str, Any]) -> Params:
    """Validate a params mapping; raise :class:`ParamsError` naming every bad key."""
    if not isinstance(raw, dict):
        raise ParamsError(f"params must be a mapping at the top level, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_format_validation_error(err)) from None


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate ``params.yaml``.

    Raises:
        ParamsError: the file is missing, not YAML, or fails validation (the message names
            the key, e.g. ``lidp.trials: Input should be greater than or equal to 2``).
    """
    p = Path(path)
    if not p.is_file():
        raise ParamsError(f"params file {p} not found")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ParamsError(f"params file {p} is not valid YAML: {err}") from None
    return parse_params(raw or {})
