"""The warm stage server: import the heavy libraries once, fork a child per stage run.

``python -m privaudit.repro.warm.server --socket PATH [--parent PID]`` imports :data:`PRELOAD`, then binds ``PATH``
(a Unix socket, made under another name and renamed: it exists only once the server is ready; its folder
should be private to the user, as :mod:`privaudit.repro.warm.session` makes it), freezes the preloaded objects out of
the garbage collector (``gc.freeze``: a child's collections neither walk nor copy them), and serves until SIGTERM or until the process ``--parent`` is gone. For each request (:mod:`.protocol`) it checks
that the client runs the same interpreter with the same start-up environment, forks, and tells the client
the child's pid and later its exit code; the parent only accepts, forks and reaps.

The child becomes the stage process: the client's standard streams on 0/1/2, its environment, working
directory and ``sys.path`` (``PYTHONPATH`` applied as the interpreter would), every module not from the
interpreter's own prefixes dropped from ``sys.modules`` (privaudit, the stages, anything on ``PYTHONPATH``:
imported fresh from disk, so edited code is never served stale), then ``runpy.run_module(module,
run_name="__main__")`` and a normal interpreter exit (``atexit``, thread joins, the exit code of
``SystemExit`` or of an uncaught exception). No thread is started before a fork, and nothing initialises
CUDA here (a child may).
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import sysconfig
import time
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path

from privaudit.repro.cuda_state import cuda_initialised
from privaudit.repro.warm.protocol import (MODULE_PREFIX, PROTOCOL_VERSION, STARTING_SUFFIX, Request,
                                          recv_request, send_message, startup_env)

#: what the stages import that costs seconds (measured per stage with ``python -X importtime``), all imported before
#: the socket appears: importing while stages run would compete with them for the cores, and the defenders
#: stage times its trainers (the plan's per-fit costs) while it runs. A module missing from the environment is
#: skipped.
PRELOAD: tuple[str, ...] = (
    "numpy", "yaml", "pydantic", "pydantic.main", "pandas", "pandas.core.arrays.arrow.extension_types",
    "pyarrow", "pyarrow.fs", "pyarrow.parquet", "pyarrow.dataset", "scipy.stats", "scipy.optimize", "scipy.special",
    "great_expectations", "great_expectations.expectations", "sklearn", "sklearn.datasets",
    "sklearn.linear_model", "sklearn.neural_network", "sklearn.model_selection", "sklearn.metrics",
    "torch", "torch._dynamo", "torch.func", "safetensors", "safetensors.torch", "skops.io", "opacus",
    "dp_accounting", "dp_accounting.pld.privacy_loss_distribution", "tqdm", "rich", "matplotlib",
    "matplotlib.figure", "matplotlib.backends.backend_agg",
)


@dataclass(frozen=True)
class Job:
    """A request this process (a fresh fork) is to run."""

    request: Request
    fds: list[int]
    base_path: list[str]
    project_modules: tuple[str, ...]


def preload(modules: Sequence[str]) -> list[str]:
    """Import ``modules``; the names that are not installed (skipped)."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def refusal(request: Request, server_env: dict[str, str]) -> str | None:
    """Why this server cannot run ``request`` as a cold ``python -m`` would, or ``None``."""
    if request.version != PROTOCOL_VERSION:
        return f"protocol {request.version}, the server speaks {PROTOCOL_VERSION}"
    # one interpreter by any of its names (a venv's python, python3, python3.11) in the same environment
    if (os.path.realpath(request.executable) != os.path.realpath(sys.executable)
            or os.path.realpath(request.prefix) != os.path.realpath(sys.prefix)):  # a symlinked venv is the same one
        return f"interpreter {request.executable} ({request.prefix}), the server runs {sys.executable} ({sys.prefix})"
    if not request.module.startswith(MODULE_PREFIX):
        return f"module {request.module} is not a stage ({MODULE_PREFIX}*)"
    theirs = startup_env(request.env)
    if theirs != server_env:
        keys = sorted(k for k in set(theirs) | set(server_env) if theirs.get(k) != server_env.get(k))
        return f"start-up environment differs from the server's ({', '.join(keys)})"
    return None


def base_sys_path() -> list[str]:
    """``sys.path`` without its script/cwd entry and the ``PYTHONPATH`` entries (what every process shares)."""
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in sys.path[1:] if p not in own]


def serve(listener: socket.socket, parent: int | None, log: Path | None = None) -> Job:
    """Accept, fork, reap until stopped; returns only in a forked child, with its job. ``log``: a JSON line per
    finished run (module, pid, exit code, seconds) is appended there."""
    server_env = startup_env(dict(os.environ))
    base_path = base_sys_path()
    project = project_modules()  # sys.modules stays as the preload left it: computed once
    gc.collect()
    gc.freeze()  # the preloaded objects: a child's collections skip them (and do not copy their pages)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    children: dict[int, tuple[socket.socket, str, float]] = {}
    while True:
        for key, _ in sel.select(timeout=0.05 if children else 1.0):
            if isinstance(key.data, int):  # a child's pidfd: it ended
                continue  # reaped below
            if isinstance(key.data, tuple):  # a client's connection: readable only when the client is gone
                _client_gone(key.data[1], key.fileobj, sel)
                continue
            conn, _addr = listener.accept()
            job = _start(conn, server_env, base_path, project, children, sel)
            if job is not None:  # the child
                for other_key in list(sel.get_map().values()):
                    if isinstance(other_key.data, int):  # another child's pidfd
                        os.close(other_key.fd)
                sel.close()
                listener.close()
                for other, _module, _t0 in children.values():
                    other.close()
                return job
        _reap(children, sel, log)
        if parent is not None and os.getppid() != parent:
            raise SystemExit(0)


def _start(conn: socket.socket, server_env: dict[str, str], base_path: list[str], project: tuple[str, ...],
           children: dict[int, tuple[socket.socket, str, float]], sel: selectors.BaseSelector) -> Job | None:
    conn.settimeout(10)
    try:
        request, fds = recv_request(conn)
    except (OSError, ValueError, EOFError) as err:
        _refuse(conn, str(err))
        return None
    reason = refusal(request, server_env)
    if reason is not None:
        for fd in fds:
            os.close(fd)
        _refuse(conn, reason)
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT):  # the server's handlers remove its socket: not the child's job
            signal.signal(sig, signal.SIG_DFL)
        conn.close()
        return Job(request=request, fds=fds, base_path=base_path, project_modules=project)
    for fd in fds:
        os.close(fd)
    try:
        send_message(conn, pid=pid)
    except OSError:  # the client is gone: nobody waits for this run
        os.kill(pid, signal.SIGTERM)
    children[pid] = (conn, request.module, time.monotonic())
    sel.register(conn, selectors.EVENT_READ, ("client", pid))
    if hasattr(os, "pidfd_open"):
        try:
            sel.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
        except OSError:
            pass  # the 50 ms poll reaps it
    return None


def _client_gone(pid: int, conn: socket.socket, sel: selectors.BaseSelector) -> None:
    """The client of a running stage closed its connection (killed, e.g. SIGKILL, which it cannot pass on): stop
    the stage, as the end of a cold stage's process would; reaped (and logged) as any other child."""
    sel.unregister(conn)
    try:
        data = conn.recv(1, socket.MSG_PEEK)
    except OSError:
        data = b""
    if data:  # the client sends nothing after its request: not an end
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _refuse(conn: socket.socket, reason: str) -> None:
    try:
        send_message(conn, refused=reason)
    except OSError:
        pass
    conn.close()


def _reap(children: dict[int, tuple[socket.socket, str, float]], sel: selectors.BaseSelector,
          log: Path | None) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for key in list(sel.get_map().values()):
            if key.data == pid:
                sel.unregister(key.fileobj)
                os.close(key.fd)
            elif key.data == ("client", pid):
                sel.unregister(key.fileobj)
        if pid not in children:
            continue
        conn, module, t0 = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if log is not None:  # before the client learns the exit: a client that reads the log then finds its run
            with log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"module": module, "pid": pid, "exit": code,
                                     "seconds": round(time.monotonic() - t0, 3)}) + "\n")
        try:
            send_message(conn, exit=code)
        except OSError:
            pass
        conn.close()


def run_job(job: Job) -> int:
    """Become the stage process of ``job`` (in the forked child) and run its module as ``__main__``."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    request = job.request
    for target, fd in enumerate(job.fds):
        os.dup2(fd, target)
    for fd in job.fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.cwd)
    _reopen_stdio()
    pythonpath = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request.cwd, *pythonpath, *job.base_path]
    for name in job.project_modules:  # privaudit, the stages, PYTHONPATH's modules: imported again, from disk
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    sys.argv = [request.module, *request.args]
    runpy.run_module(request.module, run_name="__main__", alter_sys=True)
    return 0


def _reopen_stdio() -> None:
    """New ``sys.stdin/stdout/stderr`` on descriptors 0/1/2, buffered as a fresh interpreter would."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, mode, closefd=False)
        tty = raw.isatty()
        if mode == "r":
            stream = io.TextIOWrapper(io.BufferedReader(raw), encoding=old.encoding, errors=old.errors)
        else:
            stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding=old.encoding, errors=old.errors,
                                      line_buffering=tty or name == "stderr",
                                      write_through=unbuffered or name == "stderr")
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _interpreter_roots() -> tuple[str, ...]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sysconfig.get_paths().values() if p)
    return tuple(sorted({os.path.realpath(p) for p in paths}))


def project_modules() -> tuple[str, ...]:
    """The imported modules whose files are not under the interpreter's prefixes (stdlib, site-packages):
    privaudit, the stages and whatever ``PYTHONPATH`` gave; a child forgets them and imports them again."""
    roots = _interpreter_roots()

    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == r or real.startswith(r + os.sep) for r in roots)

    project = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        paths = [file] if file else list(getattr(module, "__path__", None) or [])
        if paths and not all(inside(p) for p in paths):
            project.append(name)
    return tuple(project)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m privaudit.repro.warm.server", description=__doc__.splitlines()[0])
    p.add_argument("--socket", type=Path, required=True, help="Unix socket to bind (in a user-private folder)")
    p.add_argument("--parent", type=int, default=None, help="stop when this process is no longer the parent")
    p.add_argument("--log", type=Path, default=None, help="append a JSON line per finished stage run here")
    p.add_argument("--preload", default=None, metavar="MODULE,...",
                   help="modules to import before serving (default: PRELOAD, the stages' heavy libraries)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Bind, preload, serve; in a forked child, run the stage and return its exit code."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("DO_NOT_TRACK", "1")  # as stages/_runner.py, before Great Expectations is imported
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    binding = args.socket.with_name(args.socket.name + ".binding")
    starting = args.socket.with_name(args.socket.name + STARTING_SUFFIX)
    locking = starting.with_name(starting.name + ".new")

    def stop(_signum: int, _frame: object) -> None:
        for path in (args.socket, binding, starting, locking):
            try:
                path.unlink()
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # stages wait while this process holds the lock on ``.starting`` (released when it exits, even as a zombie);
    # locked under another name first, so that no stage ever sees the file unlocked while this process lives
    lock = locking.open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    lock.write(str(os.getpid()))
    lock.flush()
    os.rename(locking, starting)
    preload(tuple(m for m in args.preload.split(",") if m) if args.preload is not None else PRELOAD)
    if cuda_initialised():  # a forked stage could not use the GPU (torch or the driver initialised): all run cold
        print("privaudit warm: a preloaded module initialised CUDA, which a forked stage cannot use; "
              "stages run cold", file=sys.stderr, flush=True)
        stop(0, None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(binding))
    listener.listen(64)
    os.rename(binding, args.socket)  # the socket appears when it is ready
    starting.unlink()
    lock.close()
    try:
        job = serve(listener, args.parent, args.log)
    except SystemExit:
        stop(0, None)
        raise
    return run_job(job)


if __name__ == "__main__":
    sys.exit(main())
