"""The params reference page is generated from the pydantic models; every key of params.yaml is in it."""

from __future__ import annotations

import sys
from pathlib import Path
import typing
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


def test_the_committed_tables_are_the_codes() -> None:
    """The page carries the tables (a reader on a code host saw only the marker: the README's "every key" link
    led to an empty page); they are what the code generates now, or this fails naming the command."""
    page = (ROOT / "docs" / "reference" / "params.md").read_text(encoding="utf-8")
    assert params_reference.committed_tables(page) == params_reference.params_markdown().strip("\n"), (
        "docs/reference/params.md is stale: run python tools/params_reference.py --write")
    assert params_reference.filled(page) == page  # the hook and --write give the committed page back unchanged
    stale = params_reference.filled(page, tables="| `gone.key` | int | `1` |  |  |")
    assert params_reference.committed_tables(stale) != params_reference.params_markdown().strip("\n")


def test_the_page_holds_the_marker_the_hook_fills() -> None:
    page = (ROOT / "docs" / "reference" / "params.md").read_text(encoding="utf-8")
    assert params_reference.MARKER in page and params_reference.END_MARKER in page
    for source in (page, page.partition(params_reference.MARKER)[0] + params_reference.MARKER + "\n"):  # or a lone marker
        filled = params_reference.on_page_markdown(source, None, None, None)
        assert "| `gate.beta` |" in filled.partition(params_reference.MARKER)[2]
        assert "#### `kind: python`" in filled and "| `claimed_epsilon` |" in filled


def _models_in(annotation: Any) -> list[Any]:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _model_keys(model: Any, prefix: str, seen: frozenset = frozenset()) -> Iterator[tuple[str, str]]:
    """(dotted key, its last part) of every field of ``model``, into every nested model (``mechanism``'s kinds)."""
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", name
        for sub in _models_in(field.annotation):
            if sub not in seen:
                yield from _model_keys(sub, f"{prefix}{name}.", seen | {model})


def test_every_key_the_code_accepts_is_in_the_reference() -> None:
    """Walked from :class:`privaudit.config.Params` and the defender kinds, not from params.yaml: a key the
    shipped file leaves at its default (a section's rarely used key, a declared mechanism's keys) is listed too."""
    from privaudit.config import Params
    from privaudit.defenders.specs import SPEC_MODELS, DefenderSpecBase

    text = params_reference.params_markdown()
    missing = []
    for section, field in Params.model_fields.items():
        if section == "defenders":
            continue
        missing += [key for key, _ in _model_keys(field.annotation, f"{section}.") if f"| `{key}` |" not in text]
    for kind, model in SPEC_MODELS.items():
        assert f"#### `kind: {kind}`" in text, kind
        for key, name in _model_keys(model, ""):
            parts = key.split(".")
            if len(parts) == 1:
                ok = name in ("name", "kind") or f"| `{name}` |" in text
            else:  # a nested block: a defender entry (pate's teacher: the kinds above) or a mechanism's key
                block = model.model_fields[parts[0]].annotation
                nested_specs = all(issubclass(m, DefenderSpecBase) for m in _models_in(block))
                ok = nested_specs or name == "kind" or f"| `{parts[0]}.{name}` |" in text
            if not ok:
                missing.append(f"defenders[kind={kind}].{key}")
    assert not missing, f"keys the code accepts that docs/reference/params.md does not list: {sorted(set(missing))}"
    for mechanism in _models_in(SPEC_MODELS["python"].model_fields["mechanism"].annotation):
        kind = typing.get_args(mechanism.model_fields["kind"].annotation)[0]
        assert f"#### `mechanism: {{kind: {kind}}}`" in text, kind
