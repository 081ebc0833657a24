"""The params reference page is generated from the pydantic models; every key of params.yaml is in it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import params_reference  # noqa: E402


def _flat(block: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in block.items():
        if isinstance(value, dict) and key != "options":
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_every_key_of_params_yaml_is_in_the_reference() -> None:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    keys = params_reference.params_keys()
    sections = [k for k in _flat({k: v for k, v in raw.items() if k != "defenders"}) if k not in keys]
    defenders = [f"defenders[].{k}" for entry in raw["defenders"] for k in entry if f"defenders[].{k}" not in keys]
    assert not sections and not defenders, (sections, defenders)
    text = params_reference.params_markdown()
    for key in keys:
        section, _, name = key.partition(".")
        assert (f"`{key}`" in text) if section != "defenders[]" else (f"`{name}`" in text), key


def test_the_page_holds_the_marker_the_hook_fills() -> None:
    page = (ROOT / "docs" / "reference" / "params.md").read_text(encoding="utf-8")
    assert params_reference.MARKER in page
    filled = params_reference.on_page_markdown(page, None, None, None)
    assert params_reference.MARKER not in filled and "| `gate.beta` |" in filled
    assert "#### `kind: python`" in filled and "| `claimed_epsilon` |" in filled
