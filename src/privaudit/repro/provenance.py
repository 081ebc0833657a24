"""Provenance manifest: what is needed to reproduce an audit later.

Git revision (and whether the tree was dirty), the hash of ``dvc.lock``, the params, the
root seed, package versions and content hashes of the data files the audit read.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from privaudit.artifacts import file_digest
from privaudit.messages import MAX_VALUE_CHARS, cap
from privaudit.repro.environment import ENVIRONMENT_FILE, environment_changes, environment_manifest, package_versions

PACKAGES = ("privaudit", "numpy", "scipy", "pandas", "scikit-learn", "torch", "opacus", "dvc",
            "great-expectations", "prefect", "skops", "safetensors")


def hash_tree(root: Path) -> str:
    """SHA-256 over the relative paths and contents of every file under ``root`` (sorted)."""
    h = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(root) if p != root else p.name).encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def derived_seeds(seed: int, params: dict[str, Any]) -> dict[str, int]:
    """The integer seeds the stages derive from ``base.seed`` (:mod:`privaudit.seeding`), by stream name.

    Only the streams that take an integer seed are listed (defender training); numpy
    generators are spawned from ``SeedSequence(base.seed, names)`` and follow from the seed.
    """
    from privaudit.seeding import int_seed

    names = [d.get("name") for d in params.get("defenders") or [] if isinstance(d, dict) and d.get("name")]
    return {f"defenders.{n}": int_seed(seed, "defenders", n) for n in names}


def dataset_file(params: dict[str, Any], repo: Path) -> Path | None:
    """``dataset.path`` as a path (relative paths against ``repo``), or None when unset."""
    raw = (params.get("dataset") or {}).get("path")
    if raw is None or str(raw).strip() == "":
        return None
    path = Path(str(raw)).expanduser()
    return path if path.is_absolute() else repo / path


#: what the audit's numbers depend on in the repository (code, pipeline, params, Table 1 results)
CODE_PATHS: tuple[str, ...] = ("src", "stages", "dvc.yaml", "params.yaml", "pyproject.toml", "benchmarks/results")


def upstream_lock_sha256(lock: Path, own_stage: str = "report") -> str | None:
    """sha256 of ``dvc.lock``'s entries of the stages upstream of ``own_stage`` in the ``dvc.yaml`` beside it
    (canonical JSON; every entry but ``own_stage``'s without a ``dvc.yaml`` naming it); None without a lock.

    Only upstream entries are final when ``own_stage`` runs: a stage after it (``history``, which runs last on
    every ``dvc repro``) still holds the previous run's entry then, and hashing it made a fresh clone's report
    differ from the committed one while every input was the same."""
    if not lock.is_file():
        return None
    import yaml

    data = yaml.safe_load(lock.read_text()) or {}
    entries = data.get("stages") or {}
    pipeline = lock.with_name("dvc.yaml")
    declared = ((load_yaml(pipeline) or {}).get("stages") or {}) if pipeline.is_file() else {}
    keep = (set(upstream_stages(declared, own_stage)) if own_stage in declared else set(entries)) - {own_stage}
    stages = {k: v for k, v in entries.items() if k in keep}
    return hashlib.sha256(json.dumps(stages, sort_keys=True, default=str).encode()).hexdigest()


def build_manifest(repo: Path, params: dict[str, Any], seed: int, data_paths: dict[str, Path]) -> dict[str, Any]:
    """The manifest written into every report.

    Args:
        repo: repository root (for git and ``dvc.lock``).
        params: the validated params (``Params.model_dump(mode="json")``).
        seed: ``base.seed``.
        data_paths: name → file or directory whose content hash is recorded. The raw data set
            (``dataset.path``, file or folder) is added as ``dataset`` when set.

    Returns:
        ``{code_revision, code_dirty, upstream_lock_sha256, seed, seeds, params, python, platform,
        packages, data_sha256: {name: hex}, dataset_path}``.

    The manifest is part of the report, a DVC output, so it holds only what identifies the audit
    and does not change when nothing audited changed — otherwise a fresh clone's ``make audit``
    would rewrite ``dvc.lock`` on every commit:

    * ``code_revision``: the last commit that touched the audited code or its settings
      (:data:`CODE_PATHS`), not ``HEAD`` (committing the regenerated ``dvc.lock``, metrics or
      README does not move it); ``code_dirty``: uncommitted changes under those paths.
    * ``upstream_lock_sha256``: sha256 of ``dvc.lock`` without the report stage's own entry (the
      upstream entries are final when the report stage runs; its own entry is written after it).
    """
    status = _git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS, cwd=repo)
    paths = dict(data_paths)
    raw = dataset_file(params, repo)
    if raw is not None:
        paths["dataset"] = raw
    return {
        "code_revision": _git("log", "-1", "--format=%H", "--", *CODE_PATHS, cwd=repo) or _git("rev-parse", "HEAD",
                                                                                              cwd=repo),
        "code_dirty": None if status is None else bool(status),
        "upstream_lock_sha256": upstream_lock_sha256(repo / "dvc.lock"),
        "seed": seed,
        "seeds": {"base.seed": seed, **derived_seeds(seed, params)},
        "params": params,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(PACKAGES),
        "data_sha256": {k: hash_tree(p) for k, p in sorted(paths.items()) if p.exists()},
        "dataset_path": None if raw is None else str(raw),
    }


# --------------------------------------------------------------------------- gate provenance
#
# ``metrics/gate.json`` carries a ``provenance`` block tying the verdict to the workspace it was
# computed from, and ``privaudit verdict`` refuses a gate whose workspace has moved on (a failed
# ``dvc exp run`` leaves new params and half-rewritten upstream outputs next to the old gate).
#
# Two parts, chosen so that a successful ``dvc repro`` always ends "fresh" (never a refusal that
# ``dvc repro`` cannot clear) and a stale gate is refused:
#
# 1. the stamp, written by the report stage: content hashes of the stage's data inputs as they
#    lie on disk, and a hash of the stage's own params. Both are final when the stage runs, and
#    each of them is one of the stage's DVC deps/params, so any change reruns it and restamps.
#    (Not the whole params.yaml: a key no stage tracks, e.g. ``compute.scheduler``, would make
#    every later verdict refuse while ``dvc repro`` has nothing to do.)
# 2. the pipeline check, done only at verdict time against the current ``dvc.lock`` (final by
#    then; the report stage's own entry is written after gate.json, so it cannot be stamped):
#    every stage the gate depends on must have recorded the params values params.yaml holds now,
#    and every dependency produced by another stage must carry that stage's recorded output
#    hash. That is DVC's own "changed params" / "changed deps" test for everything upstream,
#    read from the lock alone (no data re-hashed): a run that stopped at any stage leaves it
#    unmet.
#
# 3. at verdict time too: the source dependencies no stage writes (``src/privaudit``, ``stages/*.py``,
#    ``data/external``, ``benchmarks/results``) re-hashed as DVC hashes them and compared with
#    ``dvc.lock`` (:func:`dependency_drift`: changed code or raw data since the gate's pipeline ran),
#    user code (:func:`user_code_drift`), and the gate stage's own outputs against ``dvc.lock``
#    (:func:`output_drift`: the gate and the report on disk are the ones the lock records).
#
# 4. fail closed: evidence that is missing, unreadable, of the wrong schema or written by another run than
#    the gate's is "cannot prove fresh", never "nothing changed". Every output of every stage in the gate's
#    pipeline must be on disk as ``dvc.lock`` records it (:func:`output_drift`), so a manifest, plan or metrics
#    file deleted by a failed stage, truncated, or swapped for an earlier run's is refused, and so is a
#    ``dvc.lock`` swapped for an earlier run's (its outputs are not the ones on disk; its params not the ones
#    in params.yaml: :func:`lock_drift`); a gate with no pipeline (computed outside ``dvc repro``) or an input
#    that was missing when it was stamped cannot be proved fresh either. (The stamp does not hash ``dvc.lock``
#    itself: a rerun whose deps moved but whose outputs did not rewrites upstream entries without rerunning
#    the report, and DVC does not promise an entry is final when a later stage reads it.)
#
# Not covered: a raw data set outside ``data/external`` (``dataset.path`` elsewhere: not a DVC dep).

PROVENANCE_VERSION = 2
#: dvc.yaml deps that are code, not data: not stamped (editing code is what ``dvc status`` reports)
CODE_DEP_PREFIXES = ("src/", "stages/")


def canonical_sha256(obj: Any) -> str:
    """SHA-256 of ``obj`` as sorted-key compact JSON (stable across runs and machines)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_yaml(path: Path) -> Any:
    """``path`` parsed as DVC parses params and lock files (ruamel, YAML 1.2; PyYAML if absent)."""
    text = path.read_text(encoding="utf-8")
    try:
        from ruamel.yaml import YAML
    except ImportError:  # pragma: no cover - ruamel comes with dvc
        import yaml

        return yaml.safe_load(text)
    return YAML(typ="safe", pure=True).load(text)


def _norm(path: str | Path) -> str:
    """A dvc.yaml/dvc.lock path as a comparable key: POSIX, no ``./`` prefix, no trailing slash."""
    text = Path(str(path)).as_posix()
    while text.startswith("./"):
        text = text[2:]
    return text.rstrip("/") or "."


_MISSING = object()


def dotted_get(data: Any, key: str) -> Any:
    """``data["a"]["b"]`` for ``"a.b"`` (list items by integer part); a sentinel when absent."""
    node = data
    for part in key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _entries(items: Any) -> list[str]:
    """Paths of a dvc.yaml ``deps``/``outs``/``metrics``/``plots`` list (strings or ``{path: opts}``)."""
    paths: list[str] = []
    for item in items or []:
        if isinstance(item, str):
            paths.append(_norm(item))
        elif isinstance(item, Mapping):
            paths += [_norm(k) for k in item]
    return paths


def _stage_outs(spec: Mapping[str, Any]) -> list[str]:
    return [p for kind in ("outs", "metrics", "plots") for p in _entries(spec.get(kind))]


def _param_keys(spec: Mapping[str, Any], default_file: str) -> dict[str, list[str]]:
    """``{params file: [keys]}`` of a dvc.yaml stage (plain keys belong to ``params.yaml``)."""
    found: dict[str, list[str]] = {}
    for item in spec.get("params") or []:
        if isinstance(item, str):
            found.setdefault(default_file, []).append(item)
        elif isinstance(item, Mapping):
            for file, keys in item.items():
                found.setdefault(str(file), []).extend(str(k) for k in (keys or []))
    return found


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def upstream_stages(stages: Mapping[str, Any], target: str) -> list[str]:
    """``target`` and every stage whose outputs it depends on, transitively (sorted names)."""
    outs = {name: _stage_outs(spec or {}) for name, spec in stages.items()}
    seen, todo = {target}, [target]
    while todo:
        deps = _entries((stages.get(todo.pop()) or {}).get("deps"))
        for name, produced in outs.items():
            if name not in seen and any(_overlaps(d, o) for d in deps for o in produced):
                seen.add(name)
                todo.append(name)
    return sorted(seen)


def _dvcignore(repo: Path) -> Any:
    """A matcher for ``repo/.dvcignore`` (gitignore syntax), or None (DVC skips those files too)."""
    file = repo / ".dvcignore"
    if not file.is_file():
        return None
    try:
        import pathspec
    except ImportError:  # pragma: no cover - pathspec comes with dvc
        return None
    lines = file.read_text(encoding="utf-8").splitlines()
    try:
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except (KeyError, LookupError):  # pathspec < 0.12 knows only the older name
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def input_hash(repo: Path, rel: str, ignore: Any = None) -> str | None:
    """SHA-256 of a file, or of a folder's relative paths and contents (``.dvcignore``d files left out).

    None when the path does not exist.
    """
    path = repo / rel
    if path.is_file():
        return file_digest(path)
    if not path.is_dir():
        return None
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        name = p.relative_to(path).as_posix()
        if ignore is not None and ignore.match_file(p.relative_to(repo).as_posix()):
            continue
        h.update(name.encode())
        h.update(b"\0")
        h.update(file_digest(p).encode())
    return h.hexdigest()


def _params_digest(repo: Path, files: Mapping[str, Sequence[str] | None]) -> str:
    """Hash of the listed keys' current values (``None`` for a file: the whole file)."""
    values: dict[str, Any] = {}
    for file, keys in sorted(files.items()):
        path = repo / file
        data = load_yaml(path) if path.is_file() else None
        if keys is None:
            values[file] = data
        else:
            got = {k: dotted_get(data, k) for k in keys}
            values[file] = {k: ("<missing>" if v is _MISSING else v) for k, v in got.items()}
    return canonical_sha256(values)


def provenance_stamp(
    repo: Path,
    stage: str = "report",
    *,
    inputs: Sequence[str | Path] | None = None,
    params_file: str = "params.yaml",
    dvc_yaml: str = "dvc.yaml",
) -> dict[str, Any]:
    """The ``provenance`` block the report stage writes into ``metrics/gate.json``.

    Args:
        repo: the repository root (the stage's working directory).
        stage: the stage writing the gate, as named in ``dvc.yaml``.
        inputs: data inputs to stamp, relative to ``repo``; default: the stage's ``deps`` in
            ``dvc.yaml`` less code (``*.py``, ``src/``, ``stages/``). Pass only paths that are
            deps of the stage: anything else could change without rerunning it.
        params_file: the default params file of ``dvc.yaml``.

    Returns:
        ``{version, stage, params: [[file, key]], params_sha256, inputs: [[path, sha256 | None]],
        pipeline: [stage names]}`` (lists, not nested objects, so that ``dvc metrics show`` /
        ``dvc exp show`` give the block a handful of columns). Without a ``dvc.yaml`` entry for
        ``stage`` the whole params file is hashed (key None) and ``pipeline`` is empty. Everything in it is final when the stage
        runs; :func:`provenance_drift` recomputes it (and checks ``pipeline`` in ``dvc.lock``).
    """
    repo = Path(repo)
    stages: Mapping[str, Any] = {}
    if (repo / dvc_yaml).is_file():
        stages = (load_yaml(repo / dvc_yaml) or {}).get("stages") or {}
    spec = stages.get(stage)
    if spec is not None:
        files: dict[str, list[str] | None] = {f: sorted(set(k)) for f, k in _param_keys(spec, params_file).items()}
        pipeline = upstream_stages(stages, stage)
        deps = _entries(spec.get("deps"))
    else:
        files, pipeline, deps = {params_file: None}, [], []
    if inputs is None:
        inputs = [d for d in deps if not d.endswith(".py") and not d.startswith(CODE_DEP_PREFIXES)]
    ignore = _dvcignore(repo)
    stamped = {_norm(p): input_hash(repo, _norm(p), ignore) for p in inputs}
    return {
        "version": PROVENANCE_VERSION,
        "stage": stage,
        "params": [[f, k] for f, keys in sorted(files.items()) for k in (keys if keys is not None else [None])],
        "params_sha256": _params_digest(repo, files),
        "inputs": [[p, h] for p, h in sorted(stamped.items())],
        "pipeline": pipeline,
    }


def _files_of(pairs: Any) -> dict[str, list[str] | None]:
    """``[[file, key], ...]`` (``key`` None: the whole file) → ``{file: [keys] | None}``."""
    files: dict[str, list[str] | None] = {}
    for file, key in pairs:
        if key is None:
            files[str(file)] = None
        elif files.get(str(file), []) is not None:
            files.setdefault(str(file), []).append(str(key))  # type: ignore[union-attr]
    return files


def _hash_value(entry: Mapping[str, Any]) -> Any:
    """The content hash of a dvc.lock dep/out entry (``md5`` for DVC 3, else what is there)."""
    for key in ("md5", "etag", "checksum"):
        if key in entry:
            return entry[key]
    return None


def lock_drift(repo: Path, stages: Sequence[str], lock_file: str = "dvc.lock") -> list[str]:
    """What ``dvc repro`` would still have to run for ``stages``, judged from ``dvc.lock`` alone.

    A stage is behind when a param it recorded differs from the params file now, or when a
    dependency produced by another stage carries another hash than that stage's output.
    Returns one line per finding (empty: every stage is up to date with params and upstream).
    """
    repo = Path(repo)
    if not stages:
        return []
    lock_path = repo / lock_file
    if not lock_path.is_file():
        return [f"{lock_file} is missing"]
    entries = (load_yaml(lock_path) or {}).get("stages") or {}
    produced: dict[str, tuple[str, Any]] = {}
    for name, entry in entries.items():
        for out in (entry or {}).get("outs") or []:
            produced[_norm(out["path"])] = (name, _hash_value(out))
    params_cache: dict[str, Any] = {}
    problems: list[str] = []
    #: (file, key, what it was, what it is) → the stages that ran with it: one line per change, not per stage
    changes: dict[tuple[str, str, str, str], list[str]] = {}
    for name in stages:
        entry = entries.get(name)
        if entry is None:
            problems.append(f"stage '{name}' has no entry in {lock_file} (it has not run)")
            continue
        for file, recorded in (entry.get("params") or {}).items():
            if file not in params_cache:
                path = repo / file
                params_cache[file] = load_yaml(path) if path.is_file() else _MISSING
            current = params_cache[file]
            if current is _MISSING:
                problems.append(f"{file} is missing (stage '{name}' reads it)")
                continue
            for key, value in sorted((recorded or {}).items()):
                now = dotted_get(current, key)
                if now is _MISSING or now != value:
                    was, became = describe_change(value, now)
                    changes.setdefault((file, key, was, became), []).append(name)
        for dep in entry.get("deps") or []:
            path = _norm(dep["path"])
            source = produced.get(path)
            if source is not None and source[0] != name and source[1] != _hash_value(dep):
                problems.append(f"{path} changed (written by stage '{source[0]}'; stage '{name}' has not run on it)")
    for (file, key, was, became), names in changes.items():
        who = f"stage '{names[0]}'" if len(names) == 1 else "stages " + ", ".join(f"'{n}'" for n in names)
        problems.append(f"{file} {key} changed ({who} ran with {was}, now {became})")
    return problems


def describe_change(old: Any, new: Any) -> tuple[str, str]:
    """A params value before and after, each short enough for a one-line message: scalars as ``repr``; a list of
    named entries (``defenders``) as what differs by name (``'mine' added``, ``'mlp' epochs=5``), never the whole
    list; anything else capped. ``new`` may be ``_MISSING`` (``unset``)."""
    if new is _MISSING:
        return cap(repr(old), MAX_VALUE_CHARS), "unset"
    if _named_entries(old) and _named_entries(new):
        before, after = {e["name"]: e for e in old}, {e["name"]: e for e in new}
        removed = [n for n in before if n not in after]
        added = [n for n in after if n not in before]
        edited = [n for n in after if n in before and after[n] != before[n]]
        was: list[str] = []
        became: list[str] = []
        for n in edited:  # first, so that "ran with" and "now" line up
            keys = sorted(k for k in set(before[n]) | set(after[n])
                          if before[n].get(k, _MISSING) != after[n].get(k, _MISSING))
            was.append(f"{n!r} " + " ".join(f"{k}={_short(before[n].get(k, _MISSING))}" for k in keys))
            became.append(f"{n!r} " + " ".join(f"{k}={_short(after[n].get(k, _MISSING))}" for k in keys))
        if not (removed or added or edited):  # the same entries in another order
            return ("entries " + ", ".join(repr(n) for n in before), "reordered " + ", ".join(repr(n) for n in after))
        was += [f"{n!r}" for n in removed]
        return (", ".join(was) or "without " + ", ".join(repr(n) for n in added),
                ", ".join(became + [f"{n!r} added" for n in added] + [f"{n!r} removed" for n in removed]))
    return cap(repr(old), MAX_VALUE_CHARS), cap(repr(new), MAX_VALUE_CHARS)


def _named_entries(value: Any) -> bool:
    """A list of mappings each with a distinct string ``name`` (the ``defenders`` list)."""
    if not isinstance(value, list) or not value or not all(isinstance(e, Mapping) for e in value):
        return False
    names = [e.get("name") for e in value]
    return all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _short(value: Any) -> str:
    """One value inside a described change: ``unset`` or its capped ``repr``."""
    return "unset" if value is _MISSING else cap(repr(value), MAX_VALUE_CHARS)


def provenance_drift(provenance: Any, repo: Path) -> list[str]:
    """How the workspace differs from a gate's ``provenance`` block (empty: the gate is current).

    Fails closed: a finding is returned for anything that cannot be proved current (a gate computed outside
    a DVC pipeline, an input that was missing when it was stamped, a recorded file that is missing,
    unreadable or of the wrong schema, a ``dvc.lock`` other than the one the gate was computed under).

    Raises:
        ValueError: ``provenance`` is absent or not a block this version wrote.
    """
    if not isinstance(provenance, Mapping):
        raise ValueError("it has no provenance block (written by an older privaudit)")
    if provenance.get("version") != PROVENANCE_VERSION:
        raise ValueError(f"its provenance block has version {provenance.get('version')!r}, "
                         f"this privaudit reads version {PROVENANCE_VERSION}")
    try:
        files = _files_of(provenance["params"])
        stamped_params = provenance["params_sha256"]
        inputs = {str(p): h for p, h in provenance["inputs"]}
        pipeline = [str(s) for s in provenance["pipeline"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"its provenance block is malformed ({exc!r})") from None
    repo = Path(repo)
    problems: list[str] = []
    stage = str(provenance.get("stage") or "")
    if not pipeline:
        problems.append(f"the gate names no pipeline stage (it was not written by the '{stage or 'report'}' stage of "
                        f"dvc.yaml under `dvc repro`), so nothing upstream of it can be proved current")
    ignore = _dvcignore(repo)
    for rel, digest in sorted(inputs.items()):
        now = input_hash(repo, rel, ignore)
        if digest is None:
            problems.append(f"{rel} was missing when the gate was computed")
        elif now != digest:
            problems.append(f"{rel} is missing" if now is None else f"{rel} changed since the gate was computed")
    behind = lock_drift(repo, pipeline)
    if _params_digest(repo, files) != stamped_params:
        pairs = [(f, k) for f, ks in files.items() for k in (ks or [f])]
        # dvc.lock's line for the key says what changed; this line stands alone only when no such line names it
        if not any(line.startswith(f"{f} {k} changed (") for f, k in pairs for line in behind):
            some = "one or more of " if len(pairs) > 1 else ""
            problems.append(f"the gate's params changed since it was computed ({some}{', '.join(k for _, k in pairs)})")
    found = (problems + behind + dependency_drift(repo, pipeline, ignore=ignore)
             + user_code_drift(repo, pipeline) + environment_drift(repo, pipeline)
             + output_drift(repo, pipeline, ignore=ignore))
    return _missing_once(found)


#: what two checks can both say of one file (``X is missing …``, ``X changed since …``): said once
_SAID_OF_A_FILE = (" is missing", " changed since ")


def _missing_once(lines: Sequence[str]) -> list[str]:
    """``lines`` with what is said of one file said once: of the checks' lines ``X is missing …`` (or ``X changed
    since …``) about one file, the one with the most detail (the longest) is kept, in its place."""
    subjects = {line: (line.split(said, 1)[0], said) for line in lines for said in _SAID_OF_A_FILE if said in line}
    best: dict[str, str] = {}
    for line, subject in subjects.items():
        if len(line) > len(best.get(subject, "")):
            best[subject] = line
    return [line for line in dict.fromkeys(lines) if line not in subjects or best[subjects[line]] == line]


def dependency_drift(repo: Path, stages: Sequence[str], lock_file: str = "dvc.lock", ignore: Any = None) -> list[str]:
    """Source dependencies of ``stages`` (deps no stage writes: ``src/privaudit``, ``stages/*.py``,
    ``data/external``, ``benchmarks/results``) whose workspace content is not what ``dvc.lock`` recorded
    when the stage ran: the gate was computed from code or data that has changed since (DVC's own
    "changed deps" test; each path hashed once). Entries without ``hash: md5`` (older DVC) are skipped.
    """
    repo = Path(repo)
    lock_path = repo / lock_file
    if not stages or not lock_path.is_file():
        return []
    entries = (load_yaml(lock_path) or {}).get("stages") or {}
    produced = {_norm(o.get("path", "")) for e in entries.values() for o in (e or {}).get("outs") or []}
    users: dict[str, list[str]] = {}
    recorded: dict[str, set[Any]] = {}
    for name in stages:
        for dep in (entries.get(name) or {}).get("deps") or []:
            path = _norm(dep.get("path", ""))
            if path in produced or dep.get("hash") != "md5" or not dep.get("md5"):
                continue
            users.setdefault(path, []).append(name)
            recorded.setdefault(path, set()).add(dep["md5"])
    problems = []
    for path in sorted(users):
        now = dvc_md5(repo / path, ignore, repo)
        if now is None or recorded[path] != {now}:
            names = users[path]
            shown = ", ".join(f"'{n}'" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            what = "is missing" if now is None else "changed"
            problems.append(f"{path} {what} since the gate's pipeline ran (a dependency of stage(s) {shown})")
    return problems


def dvc_md5(path: Path, ignore: Any = None, repo: Path | None = None) -> str | None:
    """DVC 3's ``md5`` of a file (of its bytes) or folder (``<md5 of the sorted entry list>.dir``); None when absent.

    The folder hash is DVC's (``dvc_data`` ``Tree.digest``): md5 of ``json.dumps([{"md5", "relpath"}, …],
    sort_keys=True)`` over its files sorted by relative path, ``.dvcignore``d files left out.
    """
    if path.is_file():
        return file_digest(path, "md5")
    if not path.is_dir():
        return None
    entries = []
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        if ignore is not None and repo is not None and ignore.match_file(p.relative_to(repo).as_posix()):
            continue
        entries.append({"md5": file_digest(p, "md5"), "relpath": p.relative_to(path).as_posix()})
    entries.sort(key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def output_drift(repo: Path, stages: Sequence[str], lock_file: str = "dvc.lock", ignore: Any = None) -> list[str]:
    """Outputs of ``stages`` (the gate's own stage: the gate and the report) missing from the workspace or
    not the version ``dvc.lock`` recorded (e.g. ``git checkout <rev> -- dvc.lock metrics`` followed by a
    ``dvc checkout`` that could not restore them). Entries without ``hash: md5`` (older DVC) are only
    checked for existence.
    """
    repo = Path(repo)
    lock_path = repo / lock_file
    if not stages or not lock_path.is_file():
        return []
    entries = (load_yaml(lock_path) or {}).get("stages") or {}
    problems: list[str] = []
    for name in stages:
        for out in (entries.get(name) or {}).get("outs") or []:
            rel = _norm(out.get("path", ""))
            now = dvc_md5(repo / rel, ignore, repo)
            if now is None:
                problems.append(f"{rel} is missing (an output of stage '{name}' in {lock_file})")
            elif out.get("hash") == "md5" and out.get("md5") and now != out["md5"]:
                problems.append(f"{rel} is not the version {lock_file} records for stage '{name}'")
    return problems


#: written by the ``user_code`` stage (:mod:`privaudit.repro.user_code`); always rerun by ``dvc repro``
USER_CODE_FILE = "data/user_code.json"


def _recorded_json(repo: Path, rel: str, stage: str) -> tuple[Any, str | None]:
    """The JSON a stage of the pipeline recorded at ``rel``, or ``(None, finding)`` when it cannot be read: the
    check that needs it cannot prove anything then (fail closed)."""
    from privaudit.artifacts import read_json

    path = repo / rel
    if not path.is_file():
        return None, (f"{rel} is missing (the '{stage}' stage did not finish since the gate's pipeline ran, or it "
                      f"was deleted): the gate cannot be proved current; run `dvc repro`")
    try:
        return read_json(path), None
    except (ValueError, OSError) as exc:
        return None, f"{rel} cannot be read ({exc}): the gate cannot be proved current; run `dvc repro`"


def _writer(lock: Any, stages: Sequence[str], path: str) -> str | None:
    """The stage among ``stages`` that lists ``path`` among its outputs in the parsed ``dvc.lock``, or None."""
    entries = (lock or {}).get("stages") or {}
    for name in stages:
        if any(_norm(o.get("path", "")) == path for o in (entries.get(name) or {}).get("outs") or []):
            return name
    return None


def _user_code_schema_error(recorded: Any) -> str | None:
    """Why ``recorded`` is not a :func:`privaudit.repro.user_code.user_code_manifest` (None when it is one)."""
    if not isinstance(recorded, Mapping):
        return f"it holds a {type(recorded).__name__}, not an object of defender entries"
    for name, entry in recorded.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("target"), str) \
                or not isinstance(entry.get("sha256"), str):
            return f"its entry {name!r} has no target and sha256"
    return None


def user_code_drift(repo: Path, stages: Sequence[str], params_file: str = "params.yaml",
                    lock_file: str = "dvc.lock") -> list[str]:
    """User code (``kind: python`` target/loader files and the local modules they import) edited since
    the ``user_code`` stage last hashed it; each finding names the defender and the changed files.

    The ``user_code`` stage is ``always_changed``, so its lock entry cannot tell; the files are re-hashed
    here (small) and compared with :data:`USER_CODE_FILE`. Fails closed: when ``params.yaml`` declares a
    ``kind: python`` defender and no stage of ``stages`` records the manifest, or the manifest is missing
    (a failed ``user_code`` stage deletes it), unreadable or not a manifest, the finding says so.
    """
    from privaudit.repro.user_code import UserCodeError, changed_files, python_defenders, user_code_manifest

    repo = Path(repo)
    lock_path, params_path = repo / lock_file, repo / params_file
    if not stages or not lock_path.is_file():
        return []  # lock_drift reports the missing lock; provenance_drift reports an empty pipeline
    if not params_path.is_file():
        return [f"{params_file} is missing: the user code it names cannot be checked"]
    try:
        params = load_yaml(params_path) or {}
    except Exception as exc:  # noqa: BLE001 - any parse error: cannot prove
        return [f"{params_file} cannot be read ({exc}): the user code it names cannot be checked"]
    writer = _writer(load_yaml(lock_path), stages, USER_CODE_FILE)
    if writer is None:
        if isinstance(params, Mapping) and python_defenders(params):
            return [f"no stage of the gate's pipeline records {USER_CODE_FILE} in {lock_file}, so the kind: python "
                    f"trainers params.yaml names cannot be proved unchanged; add the user_code stage of privaudit's "
                    f"dvc.yaml and run `dvc repro`"]
        return []
    recorded, problem = _recorded_json(repo, USER_CODE_FILE, writer)
    if problem is not None:
        return [problem]
    bad = _user_code_schema_error(recorded)
    if bad is not None:
        return [f"{USER_CODE_FILE} is not a user-code manifest ({bad}): the gate cannot be proved current; "
                f"run `dvc repro`"]
    try:
        now = user_code_manifest(params if isinstance(params, Mapping) else {}, repo)
    except (UserCodeError, ValueError, OSError) as exc:
        return [f"user code cannot be hashed: {exc}"]
    changed = sorted(n for n in set(recorded) | set(now) if recorded.get(n) != now.get(n))
    return [f"user code of defender '{n}' changed "
            f"({', '.join(changed_files(recorded.get(n), now.get(n))) or 'its target/loader'})" for n in changed]


def environment_drift(repo: Path, stages: Sequence[str], lock_file: str = "dvc.lock") -> list[str]:
    """Python or a result package (:data:`privaudit.repro.environment.RESULT_PACKAGES`) that is not the
    version the pipeline ran with: one line per package, e.g. ``opacus 1.6.0 → 1.7.1 since the
    pipeline ran``.

    The ``environment`` stage is ``always_changed``, so its lock entry cannot tell; the running
    interpreter's package metadata is read here (nothing imported) and compared with
    :data:`~privaudit.repro.environment.ENVIRONMENT_FILE`. Fails closed: when no stage of ``stages``
    records it, or the record is missing, unreadable or of the wrong schema, the finding says so.
    """
    repo = Path(repo)
    lock_path = repo / lock_file
    if not stages or not lock_path.is_file():
        return []  # lock_drift reports the missing lock; provenance_drift reports an empty pipeline
    writer = _writer(load_yaml(lock_path), stages, ENVIRONMENT_FILE)
    if writer is None:
        return [f"no stage of the gate's pipeline records {ENVIRONMENT_FILE} in {lock_file}, so the package "
                f"versions it was computed with cannot be proved; add the environment stage of privaudit's "
                f"dvc.yaml and run `dvc repro`"]
    recorded, problem = _recorded_json(repo, ENVIRONMENT_FILE, writer)
    if problem is not None:
        return [problem]
    if not (isinstance(recorded, Mapping) and isinstance(recorded.get("python"), str)
            and isinstance(recorded.get("packages"), Mapping)):
        return [f"{ENVIRONMENT_FILE} is not an environment record (no python and packages): the gate cannot be "
                f"proved current; run `dvc repro`"]
    return [f"{line} since the pipeline ran ({ENVIRONMENT_FILE})"
            for line in environment_changes(recorded, environment_manifest())]
