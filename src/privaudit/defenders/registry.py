"""Trainer registry: ``kind`` → the :class:`Defender` class that trains a validated spec.

Specs and trainers are registered apart. The spec models (:mod:`privaudit.defenders.specs`) are
torch-free, so ``privaudit.config`` validates params without importing a trainer; a trainer class
registers itself against its kind with :func:`register` when its module is imported, and
:func:`make_defender` imports the module of a built-in kind (:data:`TRAINER_MODULES`) the first
time that kind is trained. A user trainer is plugged in with ``kind: python`` and
``target: package.module:function`` (see :mod:`privaudit.defenders.user`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, TypeVar

from privaudit.defenders.base import Defender
from privaudit.defenders.specs import SPEC_MODELS, DefenderSpecBase, known_kinds, register_spec, validate_defender_spec

_TRAINERS: dict[str, type[Defender[Any]]] = {}

#: the module whose import registers the trainer of each built-in kind
TRAINER_MODULES: dict[str, str] = {
    "sklearn": "privaudit.defenders.sklearn_zoo",
    "logistic_regression": "privaudit.defenders.sklearn_zoo",
    "torch_mlp": "privaudit.defenders.torch_head",
    "dp_sgd": "privaudit.defenders.dp_sgd",
    "alibi": "privaudit.defenders.label_dp",
    "agibi": "privaudit.defenders.label_dp",
    "pate": "privaudit.defenders.pate",
    "mip": "privaudit.defenders.mip",
    "python": "privaudit.defenders.user",
}

D = TypeVar("D", bound=type[Defender[Any]])

__all__ = ["TRAINER_MODULES", "known_kinds", "make_defender", "register", "spec_is_observable", "trainer_class",
           "validate_defender_spec"]


def register(kind: str, spec_model: type[DefenderSpecBase] | None = None) -> Callable[[D], D]:
    """Class decorator registering a :class:`Defender` subclass as the trainer of ``kind``.

    ``spec_model`` registers a new kind's spec model too (built-in kinds have theirs in
    :mod:`privaudit.defenders.specs`).
    """

    def deco(cls: D) -> D:
        if spec_model is not None:
            register_spec(kind, spec_model)
        if kind not in SPEC_MODELS:
            raise ValueError(f"defender kind {kind!r} has no spec model; pass spec_model")
        if _TRAINERS.get(kind, cls) is not cls:
            raise ValueError(f"defender kind {kind!r} is registered twice")
        cls.kind = kind
        _TRAINERS[kind] = cls
        return cls

    return deco


def trainer_class(kind: str) -> type[Defender[Any]]:
    """The trainer of ``kind``, importing its module on first use."""
    if kind not in _TRAINERS and kind in TRAINER_MODULES:
        importlib.import_module(TRAINER_MODULES[kind])
    if kind not in _TRAINERS:
        raise ValueError(f"defender kind {kind!r} is not registered; allowed: {known_kinds()}")
    return _TRAINERS[kind]


def spec_is_observable(spec: DefenderSpecBase) -> bool:
    """Whether the defender's training can be watched by :func:`privaudit.hooks.watch` (white-box audit):
    ``kind: dp_sgd`` always, a ``kind: python`` trainer when it declares ``observable: true``."""
    return spec.observable_training()


def make_defender(spec: DefenderSpecBase, n_classes: int, device: str = "cpu") -> Defender[Any]:
    """Instantiate the trainer for a validated spec (from :func:`validate_defender_spec` or ``Params.defenders``)."""
    if not isinstance(spec, DefenderSpecBase):
        raise TypeError(f"make_defender takes a validated spec (privaudit.defenders.specs), got {type(spec).__name__}")
    return trainer_class(spec.kind)(spec, n_classes=n_classes, device=device)
