"""Defender specs are typed end to end: validated once, from params to trainer, without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from privaudit.config import load_params, parse_params
from privaudit.defenders import specs
from privaudit.defenders.registry import TRAINER_MODULES, make_defender, trainer_class
from privaudit.defenders.specs import (
    SPEC_MODELS,
    DefenderSpecBase,
    DpSgdSpec,
    LogRegSpec,
    MipSpec,
    PateSpec,
    known_kinds,
    validate_defender_spec,
)

HEAVY = ("torch", "sklearn", "skops", "pandas", "opacus", "joblib", "scipy")


def test_loading_params_imports_no_trainer(repo_root: Path) -> None:
    """``load_params("params.yaml")`` in a fresh interpreter: no torch, sklearn, skops, pandas."""
    code = ("import json, sys\nfrom privaudit.config import load_params\n"
            f"p = load_params({str(repo_root / 'params.yaml')!r})\n"
            f"print(json.dumps([len(p.defenders), [m for m in {HEAVY!r} if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo_root)
    n_defenders, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert n_defenders >= 2
    assert heavy == [], f"loading params imported {heavy}"


def test_params_hold_typed_specs_that_dump_to_the_yaml_entries(repo_root: Path) -> None:
    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    p = load_params(repo_root / "params.yaml")
    assert all(isinstance(d, SPEC_MODELS[d.kind]) for d in p.defenders)
    dumped = p.model_dump(mode="json")["defenders"]
    for entry, spec, out in zip(raw["defenders"], p.defenders, dumped):
        assert out == spec.model_dump(mode="json")  # the subclass's keys, not only name/kind
        assert {k: out[k] for k in entry} == entry  # every key the user wrote, unchanged
    assert parse_params(p.model_dump(mode="json")) == p  # and back


def test_each_spec_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = specs.validate_defender_spec

    def counting(raw: object, where: str = "defenders[?]") -> DefenderSpecBase:
        calls.append(where)
        return real(raw, where)

    monkeypatch.setattr("privaudit.config.validate_defender_spec", counting)
    p = parse_params({"defenders": [{"name": "lr", "kind": "logistic_regression"},
                                    {"name": "dp", "kind": "dp_sgd", "epsilon": 2.0}]})
    assert calls == ["defenders[0]", "defenders[1]"]
    spec = p.defender("dp")
    assert isinstance(spec, DpSgdSpec)
    model = make_defender(spec, n_classes=3)
    assert model.spec is spec  # the trainer gets the very object, not a re-validated copy
    assert calls == ["defenders[0]", "defenders[1]"]


def test_make_defender_takes_the_typed_spec_only() -> None:
    with pytest.raises(TypeError, match="validated spec"):
        make_defender({"name": "x", "kind": "logistic_regression"}, n_classes=3)


def test_every_spec_kind_has_a_lazily_loaded_trainer() -> None:
    assert sorted(TRAINER_MODULES) == known_kinds()
    for kind in known_kinds():
        assert trainer_class(kind).kind == kind


def test_nested_specs_are_typed_and_keep_their_messages() -> None:
    pate = validate_defender_spec({"name": "p", "kind": "pate", "epsilon": 2.0, "teacher": {"kind": "torch_mlp"}})
    assert isinstance(pate, PateSpec) and pate.teacher.kind == "torch_mlp" and isinstance(pate.student, LogRegSpec)
    assert pate.model_dump(mode="json")["teacher"]["hidden"] == [64]  # the nested subclass's keys are dumped
    mip = validate_defender_spec({"name": "m", "kind": "mip", "eta": 0.3, "base": {"kind": "logistic_regression"}})
    assert isinstance(mip, MipSpec) and isinstance(mip.base, LogRegSpec)
    with pytest.raises(ValueError, match=r"defenders\[1\]\.base: base\.kind 'svc'|base\.estimator 'svc'"):
        validate_defender_spec({"name": "m", "kind": "mip", "eta": 0.3, "base": {"kind": "sklearn", "estimator": "svc"}},
                               where="defenders[1]")
    with pytest.raises(ValueError, match=r"defenders\[1\]\.teacher: teacher\.kind 'mip' cannot be nested"):
        validate_defender_spec({"name": "p", "kind": "pate", "epsilon": 1.0,
                                "teacher": {"kind": "mip", "eta": 0.3, "base": {"kind": "torch_mlp"}}},
                               where="defenders[1]")
    with pytest.raises(ValueError, match=r"defenders\[1\]\.epsilon: Input should be greater than 0"):
        validate_defender_spec({"name": "d", "kind": "dp_sgd", "epsilon": -1}, where="defenders[1]")
