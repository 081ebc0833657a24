"""Running DVC from a flow: one pipeline at a time per repository, typed ``-S`` overrides.

Two ``dvc repro`` in one repository collide on DVC's own lock (the second one fails with
"Unable to acquire lock"), so every flow that runs the pipeline enters
:func:`exclusive_pipeline` first:

1. a Prefect **global concurrency limit** named :data:`DVC_CONCURRENCY_LIMIT` (1 slot),
   created by ``flows/deploy.py``. It serialises runs across every worker/``serve`` process
   that talks to the same Prefect server. Where the limit does not exist (the test harness,
   a bare ``python -m flows.audit``) Prefect logs "do not exist - skipping acquisition"
   and goes on (``strict=False``) — then only step 2 protects the repository;
2. an exclusive ``fcntl`` file lock on ``<repo>/.dvc/tmp/privaudit-flow.lock``, so that two
   flow runs on one machine wait for each other instead of failing on DVC's lock.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from privaudit.artifacts import atomic_file
from privaudit.config import Params, parse_params
from privaudit.repro.warm.session import warm_stages

DVC_CONCURRENCY_LIMIT = "privaudit-dvc"
LOCK_FILE = Path(".dvc") / "tmp" / "privaudit-flow.lock"
REPO_ROOT = Path(__file__).resolve().parents[1]
TAIL_CHARS = 4000


class PipelineError(RuntimeError):
    """A ``dvc`` command exited non-zero; the message holds the command and its output tail."""


def resolve_repo(repo: str | None) -> Path:
    """``repo`` as an absolute path to a DVC repository (default: this checkout)."""
    path = Path(repo).expanduser().resolve() if repo else REPO_ROOT
    if not (path / "dvc.yaml").is_file():
        raise ValueError(f"repo={str(path)!r} is not a DVC pipeline repository (no dvc.yaml there)")
    return path


def flow_trigger() -> str | None:
    """What started this flow run, for the audit history (``PRIVAUDIT_TRIGGER``, read by the ``history`` stage):
    ``prefect deployment <flow>/<deployment> (flow run <name>)`` for a deployment's run (a schedule's or
    one started by hand), ``prefect flow <flow> (flow run <name>)`` for a flow called directly (``python -m
    flows.audit``), ``None`` outside a flow run (the stage then records ``dvc repro``)."""
    from prefect.runtime import deployment, flow_run

    flow, run = flow_run.get_flow_name(), flow_run.get_name()
    if not flow:
        return None
    where = f"prefect deployment {flow}/{deployment.name}" if deployment.get_id() else f"prefect flow {flow}"
    return f"{where} (flow run {run})" if run else where


def pipeline_env(trigger: str | None = None) -> dict[str, str]:
    """Subprocess environment: this interpreter's bin first on PATH (``python -m stages.*``), no analytics, and
    ``PRIVAUDIT_TRIGGER`` (what started the run, recorded by the ``history`` stage) when ``trigger`` is given."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(DO_NOT_TRACK="1", DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="False")
    if trigger:
        env["PRIVAUDIT_TRIGGER"] = trigger
    return env


#: a dependency of the ``ingest`` stage that holds user data sets and is kept in git only by a
#: ``.gitkeep``; DVC fails with "missing dependency" when the folder was deleted
EXTERNAL_DATA = Path("data") / "external"


def ensure_external_data(repo: Path) -> None:
    """Recreate ``data/external`` (with its empty ``.gitkeep``, as committed) when the pipeline uses it."""
    folder, dvc_yaml = repo / EXTERNAL_DATA, repo / "dvc.yaml"
    if folder.is_dir() or not dvc_yaml.is_file() or EXTERNAL_DATA.as_posix() not in dvc_yaml.read_text(encoding="utf-8"):
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitkeep").touch()


def run_dvc(repo: Path, args: list[str], timeout_s: float | None = None,
            on_line: Callable[[str], None] | None = None) -> str:
    """Run ``python -m dvc <args>`` in ``repo``; return stdout, raise :class:`PipelineError` on failure.

    ``on_line`` gets each stdout line as it is printed (the plan, a line per finished shard with rate and
    ETA), so a Prefect run shows a long stage's progress while it runs, not when it ends. The ``history`` stage
    records the run with its trigger (:func:`flow_trigger`). The stages run on a warm stage server
    (:func:`privaudit.repro.warm.session.warm_stages`, as ``make audit`` does)."""
    ensure_external_data(repo)
    with warm_stages(pipeline_env(flow_trigger())) as env:  # the stages' heavy imports once per run
        return _run(repo, [sys.executable, "-m", "dvc", *args], args, env, timeout_s, on_line)


def _run(repo: Path, cmd: list[str], args: list[str], env: dict[str, str], timeout_s: float | None,
         on_line: Callable[[str], None] | None) -> str:
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else ""), daemon=True)
    reader.start()
    timed_out = threading.Event()

    def _kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout_s, _kill) if timeout_s is not None else None
    if timer is not None:
        timer.start()
    out: list[str] = []
    try:
        for line in proc.stdout if proc.stdout is not None else []:
            out.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))
        code = proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
    reader.join()
    stdout, stderr = "".join(out), "".join(err)
    if timed_out.is_set():
        raise PipelineError(f"`dvc {' '.join(args)}` in {repo} ran past {timeout_s} s")
    if code != 0:
        tail = (stdout + "\n" + stderr).strip()[-TAIL_CHARS:]
        raise PipelineError(f"`dvc {' '.join(args)}` in {repo} failed (exit {code}):\n{tail}")
    return stdout


def yaml_scalar(value: Any) -> str:
    """``value`` as DVC's ``-S key=value`` parses it (YAML): ``None`` → ``null``, ``True`` → ``true``."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip()
    return text.removesuffix("...").strip()


def set_overrides_args(overrides: Mapping[str, Any]) -> list[str]:
    """``{"ltu.rounds": 500}`` → ``["-S", "ltu.rounds=500"]`` (sorted by key, deterministic)."""
    args: list[str] = []
    for key in sorted(overrides):
        args += ["-S", f"{key}={yaml_scalar(overrides[key])}"]
    return args


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the params mapping ``raw`` with dotted ``overrides`` set (``a.b`` → ``raw[a][b]``)."""
    merged = yaml.safe_load(yaml.safe_dump(raw))
    for key, value in overrides.items():
        parts = key.split(".")
        node = merged
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"override {key}={value!r}: params key {part!r} is not a mapping")
            node = child
        node[parts[-1]] = value
    return merged


def check_params(repo: Path, overrides: Mapping[str, Any]) -> Params:
    """Validate ``repo/params.yaml`` with ``overrides`` applied, before any pipeline work.

    Raises:
        privaudit.config.ParamsError: a key/value is invalid; the message names the key.
    """
    raw = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8")) or {}
    return parse_params(apply_overrides(raw, overrides))


@contextmanager
def restored_file(path: Path) -> Iterator[None]:
    """Put ``path`` back byte for byte on exit (success or not): ``dvc exp run -S`` edits params.yaml.

    A file that did not exist before is removed again.
    """
    before = path.read_bytes() if path.is_file() else None
    try:
        yield
    finally:
        now = path.read_bytes() if path.is_file() else None
        if now != before:
            if before is None:
                path.unlink()
            else:
                with atomic_file(path, "wb") as fh:
                    fh.write(before)


@contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; wait up to ``timeout_s`` (TimeoutError after)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another pipeline run holds {path} for more than {timeout_s} s") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def exclusive_pipeline(repo: Path, timeout_s: float = 6 * 3600) -> Iterator[None]:
    """The global concurrency slot (when the limit exists), then the repository's file lock."""
    from prefect.concurrency.sync import concurrency

    with concurrency(DVC_CONCURRENCY_LIMIT, occupy=1, timeout_seconds=timeout_s, strict=False):
        with file_lock(repo / LOCK_FILE, timeout_s):
            yield
