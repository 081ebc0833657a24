"""Which files hold the users' own trainers, and their content hashes (``data/user_code.json``).

A ``kind: python`` defender names its code by import path (``target: package.module:train`` or
``target: path/to/file.py:train``, optional ``loader:`` in the same forms; see
:mod:`privaudit.defenders.user`). DVC cannot know that the stages training or loading that
defender depend on the file, so the ``user_code`` stage (``always_changed``) runs
:func:`user_code_manifest` on every ``dvc repro`` and writes its result as canonical JSON; the
stages that train or load defenders list ``data/user_code.json`` as a dependency. The JSON is
byte-identical while no user file changed (sorted keys, no timestamps, paths relative to the
repository), so DVC then skips everything downstream; editing a trainer changes its hash and
reruns exactly the audits of the defenders it can affect.

Only the file the import path resolves to is hashed, not the modules it imports in turn: a
trainer split over several files should keep its recipe in the target file or re-state it in
``options``.

Resolution never imports torch or the user's module itself: a file path is taken as it is
(relative to the repository root, as the stages run there), and a module path is located with
:func:`importlib.util.find_spec`, which imports only its parent packages, exactly as the
defender's own import would.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["UserCodeError", "resolve_module_file", "user_code_manifest", "python_defenders"]

#: the spec keys that name user code, in the order they are reported
CODE_KEYS = ("target", "loader")


class UserCodeError(ValueError):
    """A ``kind: python`` defender's ``target``/``loader`` does not resolve to a file; names the key."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


@contextmanager
def _on_sys_path(root: Path) -> Iterator[None]:
    """``root`` first on ``sys.path`` while resolving (the stages import from the repository root)."""
    entry = str(root)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added:
            try:
                sys.path.remove(entry)
            except ValueError:
                pass


def resolve_module_file(import_path: str, root: Path, key: str = "target") -> Path:
    """The source file of ``import_path`` (``package.module:function`` or ``path/file.py:function``).

    Args:
        import_path: the spec's ``target`` or ``loader``.
        root: the repository root; relative file paths and top-level modules resolve against it.
        key: the params key named in errors (``defenders[2].target``).

    Raises:
        UserCodeError: malformed, not found, or not backed by a source file.
    """
    if not isinstance(import_path, str) or import_path.count(":") != 1:
        raise UserCodeError(f"{key} must look like 'package.module:function' or 'path/file.py:function', "
                            f"got {import_path!r}")
    module, _ = import_path.split(":")
    if module.endswith(".py"):
        path = Path(module).expanduser()
        path = path if path.is_absolute() else root / path
        if not path.is_file():
            raise UserCodeError(f"{key} {import_path!r}: no file {path}")
        return path.resolve()
    with _on_sys_path(root):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as err:  # a parent package is missing or broken
            raise UserCodeError(f"{key} {import_path!r}: cannot locate module {module!r} ({err})") from None
    if spec is None:
        raise UserCodeError(f"{key} {import_path!r}: no module named {module!r}")
    if not spec.has_location or not spec.origin or not Path(spec.origin).is_file():
        raise UserCodeError(f"{key} {import_path!r}: module {module!r} has no source file "
                            f"(origin {spec.origin!r}); name a module file or use 'path/file.py:function'")
    return Path(spec.origin).resolve()


def _display(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (POSIX) when inside it, else absolute: stable across clones."""
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def python_defenders(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(key prefix, spec)`` of every ``kind: python`` entry of ``params["defenders"]``."""
    found = []
    for i, spec in enumerate(params.get("defenders") or []):
        if isinstance(spec, Mapping) and spec.get("kind") == "python":
            found.append((f"defenders[{i}]", dict(spec)))
    return found


def user_code_manifest(params: Mapping[str, Any], root: Path) -> dict[str, dict[str, str]]:
    """``{defender name: {target, target_file, sha256[, loader, loader_file, loader_sha256]}}``.

    Args:
        params: the raw ``params.yaml`` mapping (unvalidated is fine; only ``defenders`` is read).
        root: the repository root.

    Returns:
        One entry per ``kind: python`` defender; ``{}`` when there is none. Deterministic: file
        paths are relative to ``root`` when inside it, and nothing depends on time or on the
        machine (serialise with sorted keys).

    Raises:
        UserCodeError: a target/loader does not resolve to a file (the message names the key),
            or two python defenders share a name.
    """
    root = Path(root)
    manifest: dict[str, dict[str, str]] = {}
    for where, spec in python_defenders(params):
        name = str(spec.get("name") or where)
        if name in manifest:
            raise UserCodeError(f"{where}.name: defender name {name!r} is used twice")
        entry: dict[str, str] = {}
        for code_key in CODE_KEYS:
            value = spec.get(code_key)
            if value is None:
                if code_key == "target":
                    raise UserCodeError(f"{where}.target is required for kind: python")
                continue
            path = resolve_module_file(value, root, f"{where}.{code_key}")
            prefix = "" if code_key == "target" else "loader_"
            entry[code_key] = str(value)
            entry[f"{code_key}_file"] = _display(path, root)
            entry[f"{prefix}sha256"] = _sha256(path)
        manifest[name] = entry
    return manifest
