"""Run a command (``dvc repro``, ``dvc exp run``) with a warm stage server for its stages.

:func:`warm_stages` starts :mod:`privaudit.repro.warm.server` on a socket in a fresh user-private temporary folder
(mode 0700: no other user can connect), in its own session (a terminal's Ctrl-C reaches the stages through
their clients, not the server), and yields the environment that points stages at it; leaving the block stops
the server and removes the folder. The server also stops by itself when this process is gone.
:func:`run_warm` is ``privaudit warm -- COMMAND``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from privaudit.repro.warm.protocol import SOCKET_ENV, STARTING_SUFFIX


@contextmanager
def warm_stages(env: dict[str, str] | None = None, preload: Sequence[str] | None = None,
                log: Path | None = None) -> Iterator[dict[str, str]]:
    """Start a warm stage server; yield ``env`` (default: this process's) with ``PRIVAUDIT_WARM_SOCKET`` set.

    The server's socket appears once its imports are done (seconds): stages that start before wait for it (but
    the light ones, ``stages.NO_WAIT``, which run cold); when the server cannot start they all run cold (a note
    on stderr when the block ends). ``preload``: the modules the server imports before it serves (default:
    :data:`privaudit.repro.warm.server.PRELOAD`); ``log``: a file the server appends a JSON line to for every stage
    it ran (module, pid, exit code, seconds).
    """
    base = dict(os.environ if env is None else env)
    base.pop(SOCKET_ENV, None)
    folder = Path(tempfile.mkdtemp(prefix="privaudit-warm-"))
    path = folder / "stages.sock"
    command = [sys.executable, "-m", "privaudit.repro.warm.server", "--socket", str(path), "--parent", str(os.getpid())]
    if log is not None:
        command += ["--log", str(Path(log).resolve())]
    if preload is not None:
        command += ["--preload", ",".join(preload)]
    server = subprocess.Popen(command, env=base, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        starting = Path(str(path) + STARTING_SUFFIX)
        deadline = time.monotonic() + 10.0  # its interpreter start: then stages know to wait for it
        while not (starting.exists() or path.exists()) and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        yield {**base, SOCKET_ENV: str(path)}
    finally:
        if server.poll() not in (None, 0):
            print(f"privaudit warm: the stage server stopped with exit code {server.returncode}; the stages after "
                  "that ran cold", file=sys.stderr)
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def stages_path(env: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """``env`` with this interpreter's folder first on ``PATH`` when the ``python`` found there is another
    environment's (DVC runs every stage as ``python -m stages.<name>``: ``.venv/bin/privaudit warm --
    .venv/bin/dvc repro`` without an activated venv ran them with the system's python, which has no privaudit),
    and the note saying so (``None`` when ``PATH`` already finds this one)."""
    own = Path(sys.executable).parent
    if not (own / "python").exists():  # no ``python`` beside this interpreter (a bare python3.11): leave PATH be
        return env, None
    found = shutil.which("python", path=env.get("PATH", os.defpath))
    if found is not None and Path(found).parent.resolve() == own.resolve():
        return env, None
    note = (f"privaudit warm: `python` on PATH is {found or 'missing'}, not this environment's; the stages run "
            f"with {own / 'python'} ({own} put first on PATH)")
    return {**env, "PATH": os.pathsep.join([str(own), env.get("PATH", os.defpath)])}, note


def run_warm(command: Sequence[str], log: Path | None = None) -> int:
    """Run ``command`` with a warm stage server; its exit code (127 when it cannot be started). ``log``: as
    :func:`warm_stages`. The command's stages run with this interpreter (:func:`stages_path`)."""
    base, note = stages_path(dict(os.environ))
    if note is not None:
        print(note, file=sys.stderr)
    with warm_stages(base, log=log) as env:
        try:
            return subprocess.call(list(command), env=env)
        except OSError as err:
            print(f"privaudit warm: cannot run {command[0]!r}: {err}", file=sys.stderr)
            return 127
