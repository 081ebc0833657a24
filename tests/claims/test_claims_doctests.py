"""The doctests of every module of ``privaudit.claims`` (the claim's group privacy, the composition example)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import privaudit.claims

MODULES = sorted(f"privaudit.claims.{info.name}" for info in pkgutil.iter_modules(privaudit.claims.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
