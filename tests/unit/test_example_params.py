"""Every ``examples/*.yaml`` params file is complete for ``dvc.yaml`` and accepted by ``config.load_params``.

Issue 28: ``cp examples/params-all-defenders.yaml params.yaml && dvc repro defenders`` (README)
failed with DVC's ``Parameters 'lidp.tune_fraction, …' are missing from 'params.yaml'``: DVC
reads every ``params:`` key of every stage it checks, and uses no defaults from ``config.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from privaudit.config import Params, load_params

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def dvc_param_keys(dvc_yaml: Path) -> set[str]:
    """Every dotted key listed under a stage's ``params:`` in ``dvc.yaml`` (default file only)."""
    stages = yaml.safe_load(dvc_yaml.read_text(encoding="utf-8"))["stages"]
    keys: set[str] = set()
    for stage in stages.values():
        for item in stage.get("params") or []:
            if isinstance(item, str):
                keys.add(item)
            elif isinstance(item, dict) and "params.yaml" in item:  # {params.yaml: [keys]}
                keys.update(item["params.yaml"] or [])
    return keys


def has_key(raw: dict[str, Any], dotted: str) -> bool:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_there_are_example_params_files() -> None:
    assert [p.name for p in EXAMPLES] and all(p.suffix == ".yaml" for p in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_holds_every_key_dvc_yaml_lists(example: Path) -> None:
    raw = yaml.safe_load(example.read_text(encoding="utf-8"))
    wanted = dvc_param_keys(ROOT / "dvc.yaml")
    assert len(wanted) > 40  # the parser found the stages' params lists
    missing = sorted(k for k in wanted if not has_key(raw, k))
    assert not missing, f"{example.name} lacks keys dvc.yaml lists (DVC fails on them): {missing}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_is_accepted_by_load_params(example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # kind: python targets are repository paths (examples/user_trainer.py:train)
    params = load_params(example)
    assert isinstance(params, Params) and params.defenders


def test_the_key_check_can_fail(tmp_path: Path) -> None:
    """The completeness check flags a file that lacks a key (the state before issue 28)."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    del raw["lidp"]["tune_fraction"]
    assert not has_key(raw, "lidp.tune_fraction") and has_key(raw, "lidp.trials")
    assert "lidp.tune_fraction" in dvc_param_keys(ROOT / "dvc.yaml")
