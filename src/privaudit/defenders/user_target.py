"""Resolve a ``kind: python`` defender's ``target``/``loader`` (``package.module:function`` or
``path/to/file.py:function``) to the function it names.

Imports only the standard library: the spec model (:class:`privaudit.defenders.specs.PythonSpec`)
checks that a target resolves when the params are validated, so a typo fails before any work;
the user's module is imported then (and whatever it imports), nothing else.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable


def _import(mod_name: str) -> ModuleType:
    if mod_name.endswith(".py"):  # a file path, relative to the working directory (the repo root)
        path = Path(mod_name).resolve()
        if not path.is_file():
            raise ImportError(f"no file {path}")
        name = f"privaudit_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        return sys.modules[name]
    return importlib.import_module(mod_name)


def resolve_target(path: str, key: str = "target") -> Callable[..., Any]:
    """Import ``package.module:function`` or ``path/to/file.py:function``.

    Raises:
        ValueError: naming ``key`` if it cannot be resolved.
    """
    if not isinstance(path, str) or path.count(":") != 1:
        raise ValueError(f"{key} must look like 'package.module:function' or 'path/file.py:function', got {path!r}")
    mod_name, func_name = path.split(":")
    try:
        mod = _import(mod_name)
    except ImportError as err:
        raise ValueError(f"{key} {path!r}: cannot import {mod_name!r} ({err})") from None
    func: object = getattr(mod, func_name, None)
    if not callable(func):
        raise ValueError(f"{key} {path!r}: {mod_name!r} has no callable {func_name!r}")
    return func
