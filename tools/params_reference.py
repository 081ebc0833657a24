"""The params reference of the user guide, generated from the pydantic models of :mod:`privaudit.config`.

``params_markdown()`` renders one table per ``params.yaml`` section (key, type, default, allowed range,
description) and one per defender kind (:data:`privaudit.defenders.specs.SPEC_MODELS`). The tables are committed in
``docs/reference/params.md`` between the markers ``<!-- params-reference -->`` and ``<!-- /params-reference -->``,
so the page reads the same on a code host as in the built guide; ``python tools/params_reference.py --write``
regenerates them, and ``tests/docs/test_params_reference.py`` fails while the committed tables differ from the
code's. As an mkdocs hook (``mkdocs.yml``: ``hooks: [tools/params_reference.py]``) it fills the block afresh, so
the built guide always lists the keys the code accepts, with their defaults.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path
from typing import Any

MARKER = "<!-- params-reference -->"
END_MARKER = "<!-- /params-reference -->"
#: the page holding the committed tables
PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "params.md"
_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" if isinstance(a, str) else repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    name = getattr(annotation, "__name__", str(annotation))
    return re.sub(r"^typing\.", "", name)


def _constraints(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for attr, symbol in _BOUNDS.items():
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{symbol} {value}")
        if getattr(meta, "min_length", None) is not None:
            parts.append(f"at least {meta.min_length} item(s)")
    return ", ".join(parts)


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if hasattr(value, "model_dump"):
        return "(section)"
    text = "null" if value is None else str(value).replace("'", "")
    return f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(model: Any, prefix: str, skip: tuple[str, ...] = ()) -> list[str]:
    rows = ["| key | type | default | allowed | description |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        rows.append(f"| `{prefix}{name}` | {_cell(_type_name(field.annotation))} | {_cell(_default(field))} | "
                    f"{_cell(_constraints(field))} | {_cell(field.description or '')} |")
    return rows


def _models_in(annotation: Any) -> list[Any]:
    """The pydantic models an annotation names (through unions, ``Annotated``, lists)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def nested_defender_blocks() -> dict[str, list[Any]]:
    """The sub-blocks of a defender entry that are not defenders themselves (``mechanism``), with their models."""
    from privaudit.defenders.specs import SPEC_MODELS, DefenderSpecBase

    blocks: dict[str, list[Any]] = {}
    for model in SPEC_MODELS.values():
        for name, field in model.model_fields.items():
            for sub in _models_in(field.annotation):  # a nested defender entry (pate's teacher) is a kind above
                if not issubclass(sub, DefenderSpecBase) and sub not in blocks.setdefault(name, []):
                    blocks[name].append(sub)
    return {name: models for name, models in blocks.items() if models}


def params_keys() -> set[str]:
    """Every dotted key the reference lists (``ltu.rounds``, ``defenders[].epsilon``,
    ``defenders[].mechanism.sample_rate``, …)."""
    from privaudit.config import Params
    from privaudit.defenders.specs import SPEC_MODELS

    keys = set()
    for section, field in Params.model_fields.items():
        if section == "defenders":
            keys |= {f"defenders[].{k}" for model in SPEC_MODELS.values() for k in model.model_fields}
            keys |= {f"defenders[].{block}.{k}" for block, models in nested_defender_blocks().items()
                     for model in models for k in model.model_fields if k != "kind"}  # kind: in the heading
        else:
            keys |= {f"{section}.{k}" for k in field.annotation.model_fields}
            keys |= {f"{section}.{block}.{k}" for block, models in nested_section_blocks(field.annotation).items()
                     for model in models for k in model.model_fields}
    return keys


def nested_section_blocks(section: Any) -> dict[str, list[Any]]:
    """The sub-blocks of a params section (``gate.total_budget``), with their models."""
    return {name: models for name, field in section.model_fields.items() if (models := _models_in(field.annotation))}


def params_markdown() -> str:
    """The generated tables (Markdown) of every params section and every defender kind."""
    from privaudit.config import Params
    from privaudit.defenders.specs import SPEC_MODELS

    out: list[str] = []
    for section, field in Params.model_fields.items():
        if section == "defenders":
            continue
        out += [f"### `{section}`", ""]
        if field.annotation.__doc__ and "Create a new model" not in field.annotation.__doc__:
            out += [" ".join(field.annotation.__doc__.split()), ""]
        out += _table(field.annotation, f"{section}.") + [""]
        for block, models in nested_section_blocks(field.annotation).items():
            for model in models:
                out += [f"#### `{section}.{block}`", ""]
                if model.__doc__:
                    out += [" ".join(model.__doc__.split()), ""]
                out += _table(model, f"{section}.{block}.") + [""]
    out += ["### `defenders[i]`, by kind", "",
            "Every entry has `name` (unique; letters, digits, `_.-`) and `kind`. The keys of each kind:", ""]
    for kind in sorted(SPEC_MODELS):
        model = SPEC_MODELS[kind]
        out += [f"#### `kind: {kind}`", ""]
        if model.__doc__:
            out += [" ".join(model.__doc__.split()), ""]
        out += _table(model, "", skip=("name", "kind")) + [""]
    for block, models in nested_defender_blocks().items():
        out += [f"### `defenders[i].{block}`, by kind", ""]
        for model in models:
            kind = typing.get_args(model.model_fields["kind"].annotation)[0] if "kind" in model.model_fields else None
            out += [f"#### `{block}: {{kind: {kind}}}`" if kind else f"#### `{block}`", ""]
            if model.__doc__:
                out += [" ".join(model.__doc__.split()), ""]
            out += _table(model, f"{block}.", skip=("kind",)) + [""]
    return "\n".join(out)


def filled(markdown: str, tables: str | None = None) -> str:
    """``markdown`` with the block between :data:`MARKER` and :data:`END_MARKER` (or after a lone
    :data:`MARKER`) replaced by ``tables`` (default: :func:`params_markdown`), markers kept."""
    if MARKER not in markdown:
        return markdown
    head, _, rest = markdown.partition(MARKER)
    _, found, tail = rest.partition(END_MARKER)
    body = params_markdown() if tables is None else tables
    return f"{head}{MARKER}\n\n{body}\n{END_MARKER}\n" + (tail.lstrip("\n") if found else "")


def committed_tables(markdown: str) -> str | None:
    """The tables committed between the markers of ``markdown`` (``None`` without both markers)."""
    if MARKER not in markdown or END_MARKER not in markdown:
        return None
    return markdown.partition(MARKER)[2].partition(END_MARKER)[0].strip("\n")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: fill the params reference page's block afresh."""
    return filled(markdown)


def main(argv: list[str] | None = None) -> int:
    """``--write``: regenerate the committed tables of :data:`PAGE`; ``--check``: exit 1 while they are stale."""
    args = sys.argv[1:] if argv is None else argv
    if args not in (["--write"], ["--check"]):
        print("usage: python tools/params_reference.py --write | --check", file=sys.stderr)
        return 2
    page = PAGE.read_text(encoding="utf-8")
    if args == ["--check"]:
        current = committed_tables(page) == params_markdown().strip("\n")
        if not current:
            print(f"{PAGE} is stale: run python tools/params_reference.py --write", file=sys.stderr)
        return 0 if current else 1
    PAGE.write_text(filled(page), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
