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

Besides the target and loader files, the user's **local modules they import** are hashed
(:func:`local_imports`): every ``import``/``from … import`` statement of the file (anywhere in it,
conditional ones included) is resolved, without executing anything, to a source file under the
repository root (the stages' working directory, first on ``sys.path``) or next to the importing
file, and followed recursively; a package's ``__init__.py`` files count too. Not seen (the limit,
documented in docs/howto/own-trainer.md): imports by computed names (``importlib.import_module(name)``,
``__import__``), ``sys.path`` edits, installed packages outside the repository (their versions are
the environment's business), non-Python files the trainer reads, and ``privaudit`` itself (a DVC
dependency of every stage already).

:func:`untracked_files` lists the hashed files git does not track: ``dvc exp run`` commits only
tracked files, so such a file would silently be left out of the experiment; the stage refuses
to run then. :func:`restage_experiment_files` first stages again the untracked files that an
experiment of the current commit recorded: ``dvc exp run`` (and ``dvc exp apply``) resets git's
index to ``HEAD`` when it finishes, unstaging a trainer the user had only ``git add``-ed, and
without this the next ``dvc repro`` or ``dvc exp run`` would refuse it.

Resolution never imports torch or the user's module itself: a file path is taken as it is
(relative to the repository root, as the stages run there), and a module path is located with
:func:`importlib.util.find_spec`, which imports only its parent packages, exactly as the
defender's own import would.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from privaudit.artifacts import file_digest

__all__ = ["UserCodeError", "code_files", "local_imports", "python_defenders", "resolve_module_file",
           "restage_experiment_files", "untracked_files", "user_code_digests", "user_code_manifest"]

#: the spec keys that name user code, in the order they are reported
CODE_KEYS = ("target", "loader")


class UserCodeError(ValueError):
    """A ``kind: python`` defender's ``target``/``loader`` does not resolve to a file; names the key."""


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


def user_code_digests(defenders: Sequence[Mapping[str, Any]], root: Path) -> dict[str, str]:
    """sha256 of each ``kind: python`` defender's :func:`user_code_manifest` entry (its target, loader and the
    local modules they import), by name: the one digest of a user's trainer files, which keys its canary
    shards (:class:`privaudit.canaries.plan.CanaryPlan`) and its measured fit times
    (:mod:`privaudit.planning.timings`). ``defenders``: specs as JSON (``model_dump(mode="json")``)."""
    from privaudit.artifacts import dumps_json

    python = [dict(spec) for spec in defenders if spec.get("kind") == "python"]
    manifest = user_code_manifest({"defenders": python}, Path(root))
    return {name: hashlib.sha256(dumps_json(entry).encode()).hexdigest() for name, entry in manifest.items()}


def user_code_manifest(params: Mapping[str, Any], root: Path) -> dict[str, dict[str, Any]]:
    """``{defender name: {target, target_file, sha256[, loader, loader_file, loader_sha256][, imports]}}``.

    ``imports`` (only when there are any): ``{file: sha256}`` of the local modules the target and
    loader import, directly or through each other (:func:`local_imports`).

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
    manifest: dict[str, dict[str, Any]] = {}
    for where, spec in python_defenders(params):
        name = str(spec.get("name") or where)
        if name in manifest:
            raise UserCodeError(f"{where}.name: defender name {name!r} is used twice")
        entry: dict[str, str] = {}
        files: list[Path] = []
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
            entry[f"{prefix}sha256"] = file_digest(path)
            files.append(path)
        imports = {_display(f, root): file_digest(f) for f in local_imports(files, root)}
        if imports:  # absent for a self-contained trainer (its JSON stays as before)
            entry["imports"] = imports  # type: ignore[assignment]
        manifest[name] = entry
    return manifest


# --------------------------------------------------------------------------- local imports


def _module_candidates(dotted: str, bases: Sequence[Path]) -> list[Path]:
    """Source files ``dotted`` (``a.b.c``) can load under ``bases``: the module and its packages' ``__init__``."""
    parts = dotted.split(".")
    for base in bases:
        found: list[Path] = []
        for i in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:i])
            if (stem / "__init__.py").is_file():
                found.append(stem / "__init__.py")
            elif i == len(parts) and stem.with_suffix(".py").is_file():
                found.append(stem.with_suffix(".py"))
            elif i < len(parts) and stem.is_dir():
                continue  # a namespace package: no file of its own
            else:
                break
        else:
            if found:
                return found
    return []


def _imported_names(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(level, module, names)`` of every import statement in ``path`` (nothing is executed)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []  # not parseable here: the import itself will fail loudly when the defender runs
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", [alias.name for alias in node.names]))
    return found


def local_imports(files: Sequence[Path], root: Path) -> list[Path]:
    """The repository's own source files that ``files`` import, directly or in turn (sorted, ``files`` left out).

    A module is looked up under ``root`` (the stages' working directory, first on ``sys.path``)
    and then next to the importing file; relative imports from the importing file's folder. Only
    files inside ``root`` are returned, never ``privaudit`` itself (already a DVC dependency) nor
    installed packages. Static: ``import``/``from … import`` statements only (see the module
    docstring for what this cannot see).
    """
    root = Path(root).resolve()
    seen = {Path(f).resolve() for f in files}
    todo = list(seen)
    found: set[Path] = set()
    while todo:
        current = todo.pop()
        for level, module, names in _imported_names(current):
            if level == 0 and module.split(".")[0] == "privaudit":
                continue
            if level:
                base = current.parent  # ``from . import x``: the importing file's own package
                for _ in range(level - 1):
                    base = base.parent
                bases = [base]
            else:
                bases = [root, current.parent]
            targets = [module] if module else []
            if names:  # ``from a import b``: b may be a submodule
                targets += [f"{module}.{n}" if module else n for n in names if n != "*"]
            for dotted in targets:
                for cand in _module_candidates(dotted, bases):
                    cand = cand.resolve()
                    if cand in seen or not cand.is_relative_to(root):
                        continue
                    seen.add(cand)
                    found.add(cand)
                    todo.append(cand)
    return sorted(found)


def code_files(entry: Mapping[str, Any]) -> list[str]:
    """Every file a :func:`user_code_manifest` entry hashes (target, loader, imports), as recorded."""
    files = [entry[k] for k in ("target_file", "loader_file") if entry.get(k)]
    return sorted(set(files) | set(entry.get("imports") or {}))


def changed_files(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """The files whose hash differs between two manifest entries of one defender (added/removed included)."""
    def hashes(entry: Mapping[str, Any] | None) -> dict[str, str]:
        if not entry:
            return {}
        out = dict(entry.get("imports") or {})
        for file_key, hash_key in (("target_file", "sha256"), ("loader_file", "loader_sha256")):
            if entry.get(file_key):
                out[entry[file_key]] = entry.get(hash_key, "")
        return out

    a, b = hashes(before), hashes(after)
    return sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))


def untracked_files(manifest: Mapping[str, Mapping[str, Any]], root: Path) -> list[str]:
    """The hashed files inside ``root`` that git does not track (``[]`` outside a git work tree or without git).

    ``dvc exp run`` records only files git tracks: an untracked trainer or helper would be left
    out of the experiment (and of ``--temp``/``--queue`` runs) without a word.
    """
    root = Path(root).resolve()
    files = sorted({f for entry in manifest.values() for f in code_files(entry) if not Path(f).is_absolute()})
    if not files:
        return []
    try:
        inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True,
                                text=True, timeout=30)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return []
        tracked = subprocess.run(["git", "ls-files", "--full-name", "-z", "--", *files], cwd=root,
                                 capture_output=True, text=True, timeout=30, check=True)
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return []
    prefix = root.relative_to(Path(top).resolve()).as_posix() if top else "."
    known = {name for name in tracked.stdout.split("\0") if name}
    return [f for f in files if (f if prefix == "." else f"{prefix}/{f}") not in known]


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)


def restage_experiment_files(files: Sequence[str], root: Path) -> dict[str, str]:
    """Stage again (``git add``) those of the untracked ``files`` that an experiment of ``HEAD`` tracks.

    ``dvc exp run`` commits the index (plus ``git add -u``) as the experiment, then restores
    ``HEAD`` with a mixed reset (scmrepo's ``detach_head``), which leaves the index equal to
    ``HEAD``: a trainer that was staged but never committed is untracked again afterwards (so is
    it after ``dvc exp apply``), although the experiment recorded it. An experiment ref of this
    commit (``refs/exps/<HEAD[:2]>/<HEAD[2:]>/<name>``) whose tree holds the path is DVC's own
    record that the file was staged here; re-adding it restores the index the user had, so the
    next ``dvc repro``, ``dvc exp run`` (whose commit then includes the file) and ``--temp``/
    ``--queue`` run see it tracked. A file no experiment of ``HEAD`` tracks is left alone (the
    stage refuses it, as before). Git failures restage nothing.

    Args:
        files: paths relative to ``root``, as :func:`untracked_files` returns them.
        root: the repository root (the stages' working directory).

    Returns:
        ``{file: name of the newest experiment tracking it}`` for the files staged again.
    """
    if not files:
        return {}
    root = Path(root).resolve()
    try:
        head = _git(["rev-parse", "--verify", "-q", "HEAD"], root)
        top = _git(["rev-parse", "--show-toplevel"], root)
        if head.returncode != 0 or top.returncode != 0:
            return {}  # no commit yet (experiments need one), or not a work tree
        rev, top_dir = head.stdout.strip(), Path(top.stdout.strip()).resolve()
        prefix = root.relative_to(top_dir).as_posix()
        full = {f: f if prefix == "." else f"{prefix}/{f}" for f in files}
        refs = _git(["for-each-ref", "--sort=-committerdate", "--format=%(refname)",
                     f"refs/exps/{rev[:2]}/{rev[2:]}/"], top_dir)
        if refs.returncode != 0:
            return {}
        found: dict[str, str] = {}
        for ref in refs.stdout.split():
            todo = [full[f] for f in files if f not in found]
            if not todo:
                break
            listed = _git(["ls-tree", "-r", "--name-only", "-z", ref, "--", *todo], top_dir)
            if listed.returncode != 0:
                continue
            names = set(listed.stdout.split("\0"))
            found.update({f: ref.rsplit("/", 1)[-1] for f in files if f not in found and full[f] in names})
        if not found:
            return {}
        added = _git(["add", "--", *(full[f] for f in found)], top_dir)
        if added.returncode != 0:
            return {}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}
    return found
