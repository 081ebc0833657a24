"""Defender specs: the typed ``defenders[i]`` entries of ``params.yaml``, one pydantic model per kind.

This module imports pydantic and the standard library only, so :mod:`privaudit.config` validates
every defender without importing a trainer (torch, scikit-learn, skops, opacus). A spec is
validated once, by :func:`validate_defender_spec`, and travels as that object from the params
to the trainer (:func:`privaudit.defenders.registry.make_defender`).

:data:`SPEC_MODELS` maps ``kind`` → spec model. A new kind registers its model with
:func:`register_spec` (or :func:`privaudit.defenders.registry.register`, which also registers the
trainer); ``kind: python`` plugs in a user trainer without a new kind (:class:`PythonSpec`).
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, ValidationInfo, field_validator

from privaudit.claims.mechanisms import DeclaredMechanism, check_against_claim
from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.defenders.user_target import resolve_target
from privaudit.messages import MAX_VALUE_CHARS, cap


#: kinds the batched trainer replicates (:func:`privaudit.defenders.recipes.recipe_from_spec`): canary and black-box runs
#: of these train many models in one call; other kinds are fitted one model at a time
BATCHED_KINDS: tuple[str, ...] = ("torch_mlp", "dp_sgd")
#: kinds whose fits never touch ``base.device`` (scikit-learn estimators); the others may (a ``kind: python`` trainer
#: that declares ``device``, the label-DP, PATE and MIP trainers)
HOST_ONLY_KINDS: tuple[str, ...] = ("sklearn", "logistic_regression")


def _types_of(annotation: Any) -> list[Any]:
    """The member types of a field's annotation (``Annotated`` unwrapped, unions flattened)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _types_of(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _types_of(arg)]
    return [annotation]


def refuse_bool_numbers(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """A before-validator for every field of a params model: ``true``/``false`` where a number is expected is
    refused (pydantic's lax mode reads ``rounds: true`` as 1 without a word). A field whose type admits a bool
    is left alone; numeric strings stay accepted (PyYAML reads ``1e-5`` as a string)."""
    if isinstance(value, bool) and info.field_name is not None and info.field_name in cls.model_fields:
        kinds = _types_of(cls.model_fields[info.field_name].annotation)
        if any(k in (int, float) for k in kinds) and bool not in kinds and Any not in kinds:
            raise ValueError(f"{str(value).lower()} is a boolean where a number is expected; write the number")
    return value


class DefenderSpecBase(BaseModel):
    """Keys every ``defenders[i]`` entry has; kinds subclass this with their own keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    numbers_are_not_booleans = field_validator("*", mode="before")(classmethod(refuse_bool_numbers))

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str

    def observable_training(self) -> bool:
        """Whether the recipe's optimizer calls :func:`privaudit.hooks.watch` (white-box audit)."""
        return False

    def claims_epsilon(self) -> bool:
        """Whether the spec declares an ε (known from params, before training; the claim itself is
        recorded by the defenders stage in ``info.json``)."""
        return False


#: ``defenders[i].kind`` → its spec model (built-in kinds below; others via :func:`register_spec`)
SPEC_MODELS: dict[str, type[DefenderSpecBase]] = {}


def register_spec(kind: str, model: type[DefenderSpecBase]) -> None:
    """Register the spec model of ``kind`` (a kind has one model)."""
    if SPEC_MODELS.get(kind, model) is not model:
        raise ValueError(f"defender kind {kind!r} is registered twice")
    SPEC_MODELS[kind] = model


def known_kinds() -> list[str]:
    """Every registered defender kind, sorted."""
    return sorted(SPEC_MODELS)


def validate_defender_spec(raw: Any, where: str = "defenders[?]") -> DefenderSpecBase:
    """Validate one ``defenders`` entry against its kind's model; return the spec (defaults filled in).

    Raises:
        ValueError: naming ``where`` (e.g. ``defenders[1]``) and the bad key.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a mapping with 'name' and 'kind', got {raw!r}")
    kind = raw.get("kind")
    model = SPEC_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(f"{where}.kind {kind!r} is not a known defender kind; allowed: {known_kinds()}")
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        parts = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                known = sorted(model.model_fields) if len(e["loc"]) == 1 else None
                msg = f"unknown key (a kind: {kind} entry takes {', '.join(known)})" if known else "unknown key"
            quoted = e["type"] not in {"extra_forbidden", "missing"} and not isinstance(e.get("input"), dict)
            got = f" (got {cap(repr(e['input']), MAX_VALUE_CHARS)})" if quoted else ""
            parts.append(f"{where}.{key}: {msg}{got}")
        raise ValueError("; ".join(parts)) from None


Randomness = Literal["fixed", "shuffled", "unseeded"]


class SklearnSpec(DefenderSpecBase):
    """``kind: sklearn``: one estimator of the LTU Table 1 zoo (:mod:`privaudit.defenders.sklearn_zoo`)."""

    estimator: Literal[
        "logistic_regression", "bayesian_ridge", "gaussian_nb", "svc", "knn",
        "linear_svc", "sgd_svm", "mlp", "perceptron", "random_forest",
    ] = "logistic_regression"
    randomness: Randomness = "unseeded"
    random_state: int = Field(0, ge=0, description="the fixed, public seed of 'fixed'/'shuffled'")
    options: dict[str, Any] = Field(default_factory=dict, description="extra estimator keyword arguments")


class LogRegSpec(SklearnSpec):
    """``kind: logistic_regression`` — a shorthand for ``kind: sklearn, estimator: logistic_regression``."""

    estimator: Literal["logistic_regression"] = "logistic_regression"


class TorchMLPSpec(DefenderSpecBase):
    """``kind: torch_mlp`` (:mod:`privaudit.defenders.torch_head`)."""

    hidden: list[int] = Field(default_factory=lambda: [64], description="hidden widths; [] = linear head")
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(0.05, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    randomness: Randomness = "unseeded"
    random_state: int = Field(0, ge=0)


class DpSgdSpec(DefenderSpecBase):
    """``kind: dp_sgd`` keys (a fixed contract: the batched trainer replicates this recipe)."""

    hidden: list[int] = Field(default_factory=list, description="[] = linear head, else MLP widths")
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(64, ge=1, description="expected batch size; Poisson rate q = batch_size / n_train")
    lr: float = Field(0.5, gt=0, description="plain SGD, no momentum")
    max_grad_norm: float = Field(1.0, gt=0, description="per-example clipping norm C")
    epsilon: float = Field(gt=0, description="target epsilon")
    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: Literal["rdp", "prv", "gdp"] = "prv"
    randomness: Literal["shuffled", "unseeded"] = "unseeded"
    random_state: int = 0

    def observable_training(self) -> bool:
        return True  # fit() hands its DPOptimizer to privaudit.hooks.watch

    def claims_epsilon(self) -> bool:
        return True

    def sample_rate(self, n_train: int) -> float:
        """Poisson sampling rate q = batch_size / n_train (capped at 1)."""
        if n_train < 1:
            raise ValueError(f"n_train must be >= 1, got {n_train}")
        return min(1.0, self.batch_size / n_train)

    def steps(self, n_train: int) -> int:
        """Number of DP-SGD steps: epochs × round(1/q)."""
        return self.epochs * max(1, round(1.0 / self.sample_rate(n_train)))


class AlibiSpec(TorchMLPSpec):
    """``kind: alibi``: the torch head keys plus the label-DP mechanism (:mod:`privaudit.defenders.label_dp`)."""

    epsilon: float = Field(gt=0, description="label-DP epsilon")
    postprocess: Literal["bayes", "simplex"] = "bayes"
    prior: Literal["uniform", "noisy"] = "uniform"

    def claims_epsilon(self) -> bool:
        return True


class AgibiSpec(AlibiSpec):
    """``kind: agibi``: Gaussian soft randomized response at (ε, δ)."""

    delta: float = Field(1e-5, gt=0, lt=1)


#: kinds that cannot be a PATE teacher/student (randomized wrappers, user code)
NESTED_FORBIDDEN: frozenset[str] = frozenset({"pate", "mip", "python"})


def _nested(v: Any, key: str) -> DefenderSpecBase:
    if isinstance(v, DefenderSpecBase):
        return v
    if not isinstance(v, dict):
        raise ValueError(f"{key} must be a defender spec mapping, got {v!r}")
    spec = validate_defender_spec({"name": key, **v}, where=key)
    if spec.kind in NESTED_FORBIDDEN:
        raise ValueError(f"{key}.kind {spec.kind!r} cannot be nested; use a plain trainer")
    return spec


class PateSpec(DefenderSpecBase):
    """``kind: pate`` keys (:mod:`privaudit.defenders.pate`)."""

    teacher: SerializeAsAny[DefenderSpecBase] = Field(
        default_factory=lambda: LogRegSpec(name="teacher", kind="logistic_regression"))
    student: SerializeAsAny[DefenderSpecBase] = Field(
        default_factory=lambda: LogRegSpec(name="student", kind="logistic_regression"))
    teachers: int = Field(25, ge=2)
    query_fraction: float = Field(0.1, gt=0, lt=1, description="share of training rows used as unlabeled queries")
    epsilon: float = Field(gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)
    threshold_fraction: float = Field(0.5, gt=0, le=1, description="T / teachers (Table 3: 0.5)")
    sigma1_over_sigma2: float = Field(8.0, gt=0, description="σ1/σ2 (Table 3 CIFAR-10 high row: 160/20)")

    def claims_epsilon(self) -> bool:
        return True

    @field_validator("teacher", mode="before")
    @classmethod
    def _teacher(cls, v: Any) -> DefenderSpecBase:
        return _nested(v, "teacher")

    @field_validator("student", mode="before")
    @classmethod
    def _student(cls, v: Any) -> DefenderSpecBase:
        return _nested(v, "student")


#: defender kinds whose model is a parameter vector
VECTOR_KINDS: frozenset[str] = frozenset({"torch_mlp", "dp_sgd", "alibi", "agibi", "logistic_regression", "sklearn"})
#: sklearn estimators whose fitted state is ``coef_`` + ``intercept_``
LINEAR_ESTIMATORS: frozenset[str] = frozenset({"logistic_regression", "linear_svc", "sgd_svm", "perceptron"})


class MipSpec(DefenderSpecBase):
    """``kind: mip`` keys (:mod:`privaudit.defenders.mip`)."""

    eta: float = Field(gt=0, le=0.5, description="target MIP advantage eta")
    base: SerializeAsAny[DefenderSpecBase] = Field(description="the wrapped defender spec (a parameter-vector kind)")
    half_splits: int = Field(20, ge=2, description="B: half-splits used to estimate sigma")
    moment: int = Field(2, ge=2, description="M: moment order of Corollary 8")
    sigma_floor: float = Field(1e-8, gt=0, description="sigma_j for coordinates that never vary")

    @field_validator("base", mode="before")
    @classmethod
    def _validate_base(cls, v: Any) -> DefenderSpecBase:
        if isinstance(v, DefenderSpecBase):
            return v
        if not isinstance(v, dict):
            raise ValueError(f"base must be a defender spec mapping, got {v!r}")
        spec = validate_defender_spec({"name": "base", **v}, where="base")
        if spec.kind not in VECTOR_KINDS:
            raise ValueError(f"base.kind {spec.kind!r} has no parameter vector; allowed: {sorted(VECTOR_KINDS)}")
        if isinstance(spec, SklearnSpec) and spec.estimator not in LINEAR_ESTIMATORS:
            raise ValueError(f"base.estimator {spec.estimator!r} has no parameter vector; "
                             f"allowed: {sorted(LINEAR_ESTIMATORS)}")
        return spec


class PythonSpec(DefenderSpecBase):
    """``kind: python`` keys (:mod:`privaudit.defenders.user`); ``target``/``loader`` are imported when
    the spec is validated, so a typo fails before any work."""

    target: str = Field(description="package.module:function training the model")
    loader: str | None = Field(None, description="package.module:function rebuilding a model from its state")
    options: dict[str, Any] = Field(default_factory=dict)
    deterministic: bool = False
    order_invariant: bool = False
    claimed_epsilon: float | None = Field(None, gt=0)
    claimed_delta: float | None = Field(None, ge=0, lt=1, description="0 (or left out): a pure epsilon-DP claim")
    claimed_neighbourhood: Neighbourhood = Field(
        Neighbourhood.ADD_REMOVE, description="what the claim protects: add/remove a record (DP-SGD), replace one, or one label")
    mechanism: DeclaredMechanism | None = Field(
        None, description="the mechanism the trainer runs (privaudit.claims.mechanisms): its whole trade-off curve "
                          "is the claim the black-box bounds test; left out, only the (epsilon, delta) point")
    observable: bool = Field(False, description="the trainer calls privaudit.hooks.watch(optimizer, ...) on its "
                                                "opacus DPOptimizer, so the white-box audit applies")
    accountant: Literal["prv", "rdp", "gdp"] = Field(
        "prv", description="the opacus accountant the trainer calibrates its noise with; the white-box audit "
                           "turns the observed noise into eps with the same one")
    trusted_types: list[str] = Field(default_factory=list, description="extra skops types to trust on load")

    def observable_training(self) -> bool:
        return self.observable

    def claims_epsilon(self) -> bool:
        return self.claimed_epsilon is not None

    @field_validator("mechanism")
    @classmethod
    def _mechanism_carries_claim(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return v
        eps = info.data.get("claimed_epsilon")
        if eps is None:
            raise ValueError("a mechanism is declared without claimed_epsilon: add the claim it carries "
                             "(claimed_epsilon, claimed_delta), or remove mechanism")
        check_against_claim(v, float(eps), float(info.data.get("claimed_delta") or 0.0), "mechanism")
        return v

    @field_validator("target", "loader")
    @classmethod
    def _importable(cls, v: str | None, info: Any) -> str | None:
        if v is not None:
            resolve_target(v, info.field_name)
        return v


for _kind, _model in (
    ("sklearn", SklearnSpec), ("logistic_regression", LogRegSpec), ("torch_mlp", TorchMLPSpec),
    ("dp_sgd", DpSgdSpec), ("alibi", AlibiSpec), ("agibi", AgibiSpec), ("pate", PateSpec), ("mip", MipSpec),
    ("python", PythonSpec),
):
    register_spec(_kind, _model)
