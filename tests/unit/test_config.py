from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from privaudit.config import ParamsError, load_params, parse_params
from privaudit.defenders.specs import LogRegSpec

MIN = {"defenders": [{"name": "lr", "kind": "logistic_regression"}]}


def _with(**overrides):
    raw = {**MIN}
    for dotted, value in overrides.items():
        block, _, key = dotted.partition("__")
        raw.setdefault(block, {})
        raw[block] = {**raw[block], key: value}
    return raw


def test_repository_params_are_valid(repo_root: Path) -> None:
    p = load_params(repo_root / "params.yaml")
    assert p.dataset.name == "digits"
    assert p.lidp.k_canaries() == round(p.lidp.trials ** 0.5)
    assert {d.name for d in p.defenders} >= {"logreg", "mlp"}


def test_defaults_fill_in() -> None:
    p = parse_params(MIN)
    assert p.base.seed == 2026 and p.split.defender_fraction == 0.5
    spec = p.defenders[0]
    assert isinstance(spec, LogRegSpec) and spec.randomness == "unseeded"  # kind defaults applied


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({**MIN, "ltu": {"roundz": 3}}, "ltu.roundz: unknown key"),
        ({**MIN, "bogus": {}}, "bogus: unknown key"),
        (_with(lidp__trials=1), "lidp.trials"),
        (_with(ltu__rounds=0), "ltu.rounds"),
        (_with(split__defender_fraction=1.5), "split.defender_fraction"),
        (_with(lidp__delta=1.0), "lidp.delta"),
        (_with(lidp__order=3), "lidp.order"),
        (_with(base__device="tpu"), "base.device"),
        (_with(dataset__name="imagenet"), "unknown data set 'imagenet'"),
        (_with(dataset__name="csv"), "dataset.path is required"),
        (_with(featurize__backbone="resnet"), "unknown backbone 'resnet'"),
        ({"defenders": [{"name": "x", "kind": "nope"}]}, "defenders[0].kind 'nope' is not a known defender kind"),
        ({"defenders": [{"name": "x", "kind": "torch_mlp", "lr": -1}]}, "defenders[0].lr"),
        ({"defenders": [{"name": "x", "kind": "torch_mlp", "lrr": 1}]}, "defenders[0].lrr: unknown key"),
        ({"defenders": [{"name": "x", "kind": "torch_mlp", "lrr": 1}]}, "(a kind: torch_mlp entry takes batch_size,"),
        ({"defenders": [{"name": "a", "kind": "logistic_regression"}] * 2}, "used twice"),
        ({"defenders": []}, "defenders"),
        ({**MIN, "canaries": {"defenders": ["ghost"]}}, "canaries.defenders names 'ghost'"),
        ({**MIN, "gate": {"min_privacy": 2}}, "gate.min_privacy"),
    ],
)
def test_bad_params_name_the_key(raw: dict, needle: str) -> None:
    with pytest.raises(ParamsError) as err:
        parse_params(raw)
    assert needle in str(err.value)


@pytest.mark.parametrize("raw, key", [
    (_with(ltu__rounds=True), "ltu.rounds"),
    (_with(lidp__trials=False), "lidp.trials"),
    (_with(split__defender_fraction=True), "split.defender_fraction"),
    (_with(base__seed=True), "base.seed"),
    (_with(compute__n_jobs=True), "compute.n_jobs"),  # int | "auto"
    ({"defenders": [{"name": "x", "kind": "torch_mlp", "epochs": True}]}, "defenders[0].epochs"),
])
def test_a_boolean_where_a_number_belongs_is_refused(raw: dict, key: str) -> None:
    """``rounds: true`` was read as 1 without a word (pydantic's lax mode; the walkthrough found it)."""
    with pytest.raises(ParamsError, match=rf"{re.escape(key)}: true|{re.escape(key)}: false") as err:
        parse_params(raw)
    assert "is a boolean where a number is expected" in str(err.value)


def test_booleans_stay_booleans_and_numbers_numbers() -> None:
    """A bool field still takes a bool, and a number written as an int, a float or PyYAML's string form of
    ``1e-5`` still validates (numeric strings are not refused)."""
    p = parse_params({**_with(ltu__rounds=7, split__defender_fraction=0.4),
                      "gate": {"use_error_bars": False}})
    assert p.ltu.rounds == 7 and p.split.defender_fraction == 0.4 and p.gate.use_error_bars is False
    spec = parse_params({"defenders": [{"name": "d", "kind": "dp_sgd", "epsilon": 1, "delta": "1e-5"}]}).defenders[0]
    assert spec.delta == 1e-5 and spec.epsilon == 1.0


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(MIN))
    assert load_params(ok).defenders[0].name == "lr"


def test_lidp_auto_sizes() -> None:
    p = parse_params(_with(lidp__trials=100))
    assert p.lidp.k_canaries() == 10 and p.lidp.m_null() == 10
    p = parse_params(_with(lidp__trials=100, lidp__canaries=3, lidp__null_canaries=7))
    assert p.lidp.k_canaries() == 3 and p.lidp.m_null() == 7


def test_report_table1_takes_one_path_or_a_list() -> None:
    assert parse_params({**MIN, "report": {"table1": "a/table1_digits.csv"}}).report.table1 == ["a/table1_digits.csv"]
    both = ["a/table1_digits.csv", "a/table1_location.csv"]
    assert parse_params({**MIN, "report": {"table1": both}}).report.table1 == both
    assert parse_params({**MIN, "report": {"table1": None}}).report.table1 is None
    with pytest.raises(ParamsError, match="report.table1"):
        parse_params({**MIN, "report": {"table1": 3}})


def test_n_jobs_auto_is_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """compute.n_jobs / ltu.n_jobs: auto → len(os.sched_getaffinity(0)); ints as given; ltu -1 → all cores."""
    import os

    from privaudit import config

    cores = len(os.sched_getaffinity(0))
    p = parse_params(MIN)
    assert p.compute.n_jobs == "auto" and p.compute.workers() == config.available_cores() == cores
    monkeypatch.setattr(config, "available_cores", lambda: 7)
    p = parse_params(_with(compute__n_jobs="auto", ltu__n_jobs="auto"))
    assert p.compute.workers() == 7 and p.ltu.workers() == 7
    assert parse_params(_with(ltu__n_jobs=-1)).ltu.workers() == 7
    p = parse_params(_with(compute__n_jobs=3, ltu__n_jobs=1))
    assert p.compute.workers() == 3 and p.ltu.workers() == 1


@pytest.mark.parametrize("raw", [_with(compute__n_jobs=0), _with(compute__n_jobs="all"), _with(ltu__n_jobs=0),
                                 _with(ltu__n_jobs="many")])
def test_bad_n_jobs_name_the_key(raw: dict) -> None:
    block = next(b for b in ("compute", "ltu") if "n_jobs" in raw.get(b, {}))
    with pytest.raises(ParamsError, match=f"{block}.n_jobs"):
        parse_params(raw)
