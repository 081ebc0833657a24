"""One value per default: params.yaml, ``privaudit.config`` and the library's options agree.

A key missing from a user's params.yaml takes the config default; a library function called
without the stage takes its own keyword default. If those three disagreed (issue 16: ``ltu.rounds``
was 1000 in params.yaml and 200 in config; ``learned_mode`` one_split vs exact), the same
"default" audit would mean three different things depending on how it is run.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from pydantic import BaseModel

from privaudit import config
from privaudit.audits.game3 import game3_interval
from privaudit.audits.lidp import lidp_audit
from privaudit.attacks.ltu_evaluation import AttackerOptions
from privaudit.attacks.sample_risk import RiskOptions
from privaudit.audits.one_run import one_run_audit
from privaudit.audits.whitebox import whitebox_audit

REPO = Path(__file__).resolve().parents[2]

#: params.yaml keys that deliberately differ from the config default, with the reason
PROJECT_CHOICES: dict[str, str] = {
    "report.table1": "this repository shows its own benchmark tables; a user's project has none (default: no table)",
}


def _config_defaults(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.update(_config_defaults(ann, f"{prefix}{name}."))
        elif not field.is_required():
            out[f"{prefix}{name}"] = field.get_default(call_default_factory=True)
    return out


def _flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _library_defaults(obj: Callable[..., Any] | type) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return {f.name: f.default for f in dataclasses.fields(obj) if f.default is not dataclasses.MISSING}
    sig = inspect.signature(obj)
    return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


CONFIG = _config_defaults(config.Params)

#: (library object, params block, {library name: params key} where the names differ)
LIBRARY: list[tuple[Any, str, dict[str, str]]] = [
    (AttackerOptions, "ltu", {}),
    (RiskOptions, "ltu", {"reference_models": "risk_reference_models", "level": "risk_level",
                          "correction": "risk_correction"}),
    (whitebox_audit, "whitebox", {}),
    (one_run_audit, "one_run", {}),
    (lidp_audit, "lidp", {}),
    (game3_interval, "game3", {}),
]


def test_params_yaml_agrees_with_config_defaults() -> None:
    shipped = _flatten(yaml.safe_load((REPO / "params.yaml").read_text()))
    bad = {k: (v, CONFIG[k]) for k, v in shipped.items()
           if k in CONFIG and k not in PROJECT_CHOICES and v != CONFIG[k]}
    assert not bad, f"params.yaml value vs config default: {bad}"
    for key in PROJECT_CHOICES:
        assert key in shipped and shipped[key] != CONFIG[key], f"{key} is no longer a project choice; drop it"


def _disagreements(obj: Any, block: str, renamed: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    lib = _library_defaults(obj)
    for name in renamed:
        assert name in lib, f"{obj.__name__} has no default for {name}"
    compared = {f"{block}.{renamed.get(n, n)}": (v, CONFIG[f"{block}.{renamed.get(n, n)}"])
                for n, v in lib.items() if f"{block}.{renamed.get(n, n)}" in CONFIG}
    assert compared, f"{obj.__name__} shares no setting with the {block} block: the pairing is wrong"
    return {k: v for k, v in compared.items() if v[0] != v[1]}


@pytest.mark.parametrize("obj, block, renamed", LIBRARY, ids=lambda x: getattr(x, "__name__", None))
def test_library_defaults_agree_with_config(obj: Any, block: str, renamed: dict[str, str]) -> None:
    bad = _disagreements(obj, block, renamed)
    assert not bad, f"{obj.__name__} default vs config default: {bad}"


def test_detector_catches_a_planted_disagreement() -> None:
    @dataclasses.dataclass(frozen=True)
    class Planted:
        rounds: int = 7
        learned_mode: str = "one_split"

    def planted_audit(X: Any, *, runs: int = 3, canary_scale: float = 4.0) -> None: ...

    assert _disagreements(Planted, "ltu", {}) == {"ltu.rounds": (7, 1000)}
    assert _disagreements(planted_audit, "whitebox", {}) == {"whitebox.runs": (3, 2)}
