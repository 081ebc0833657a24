"""Defender registry: ``defenders[i].kind`` → (params model, trainer class).

Built-in kinds register themselves when their module is imported; :func:`_load_builtins`
imports them on first use so that ``privaudit.config`` can validate specs without the
caller importing every trainer. A user trainer is plugged in with
``kind: python`` and ``target: package.module:function`` (see :mod:`privaudit.defenders.user`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, TypeVar

from pydantic import ValidationError

from privaudit.defenders.base import Defender, DefenderSpecBase

_KINDS: dict[str, tuple[type[DefenderSpecBase], type[Defender]]] = {}

#: modules whose import registers the built-in kinds
BUILTIN_MODULES: tuple[str, ...] = (
    "privaudit.defenders.sklearn_zoo",
    "privaudit.defenders.torch_head",
    "privaudit.defenders.dp_sgd",
    "privaudit.defenders.label_dp",
    "privaudit.defenders.pate",
    "privaudit.defenders.mip",
    "privaudit.defenders.user",
)

D = TypeVar("D", bound=type[Defender])


def register(kind: str, spec_model: type[DefenderSpecBase]) -> Callable[[D], D]:
    """Class decorator registering a :class:`Defender` subclass under ``kind``."""

    def deco(cls: D) -> D:
        if kind in _KINDS and _KINDS[kind][1] is not cls:
            raise ValueError(f"defender kind {kind!r} is registered twice")
        cls.kind = kind
        _KINDS[kind] = (spec_model, cls)
        return cls

    return deco


def _load_builtins() -> None:
    for mod in BUILTIN_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as err:  # a module of an optional kind not present
            if err.name != mod:
                raise


def known_kinds() -> list[str]:
    _load_builtins()
    return sorted(_KINDS)


def validate_defender_spec(raw: Any, where: str = "defenders[?]") -> dict[str, Any]:
    """Validate one ``defenders`` entry against its kind's schema; return it with defaults.

    Raises:
        ValueError: naming ``where`` (e.g. ``defenders[1]``) and the bad key.
    """
    _load_builtins()
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a mapping with 'name' and 'kind', got {raw!r}")
    kind = raw.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"{where}.kind {kind!r} is not a known defender kind; allowed: {sorted(_KINDS)}")
    spec_model, _ = _KINDS[kind]
    try:
        spec = spec_model.model_validate(raw)
    except ValidationError as err:
        parts = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, ")
            parts.append(f"{where}.{key}: {msg}")
        raise ValueError("; ".join(parts)) from None
    return spec.model_dump(mode="json")


def spec_is_observable(spec: dict[str, Any]) -> bool:
    """Whether the defender's training can be watched by :func:`privaudit.hooks.watch` (white-box audit):
    ``kind: dp_sgd`` always, a ``kind: python`` trainer when it declares ``observable: true``."""
    _load_builtins()
    kind = spec.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"defender kind {kind!r} is not registered; allowed: {sorted(_KINDS)}")
    return bool(_KINDS[kind][0].model_validate(spec).observable_training())


def make_defender(spec: dict[str, Any], n_classes: int, device: str = "cpu") -> Defender:
    """Instantiate the trainer for a validated spec (a dict from :func:`validate_defender_spec`)."""
    _load_builtins()
    kind = spec.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"defender kind {kind!r} is not registered; allowed: {sorted(_KINDS)}")
    spec_model, cls = _KINDS[kind]
    return cls(spec_model.model_validate(spec), n_classes=n_classes, device=device)
