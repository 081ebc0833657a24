"""Run the doctest of every public function in privaudit.stats (the known-ε Gaussian mechanism included)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import privaudit.stats

MODULES = sorted(
    f"{pkg.__name__}.{info.name}"
    for pkg in (privaudit.stats,)
    for info in pkgutil.iter_modules(pkg.__path__)
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_every_public_function_has_a_doctest(name: str) -> None:
    module = importlib.import_module(name)
    for fname in getattr(module, "__all__", []):
        obj = getattr(module, fname)
        if inspect.isfunction(obj):
            assert obj.__doc__ and ">>>" in obj.__doc__, f"{name}.{fname} lacks a doctest"
