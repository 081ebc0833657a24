"""The stage side of the warm server: hand ``python -m stages.<name> ...`` to it, or return and run cold.

:func:`hand_off_stage` is called from ``stages/__init__.py``, before a stage imports anything: when
``PRIVAUDIT_WARM_SOCKET`` names a server and this process is ``python -m stages.<name> ...``, it sends the run
there and ends this process with the stage's exit code (``SystemExit``). Signals this process gets (DVC
stopping on Ctrl-C, a timeout's SIGTERM) are passed to the stage's process. Every way the server cannot take
the run — no server, one that died while it imported, refused (another interpreter, other start-up environment), closed before the stage
started — returns, and the stage runs here, cold, with a one-line note on stderr when a server was meant.
Stdlib only.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys
import time

from privaudit.repro.warm.protocol import (MODULE_PREFIX, SOCKET_ENV, STARTING_SUFFIX, recv_message, send_request,
                                          this_request)

#: the longest a stage waits for a server that is still importing (then it runs cold)
WAIT_S = 120.0
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def stage_invocation(orig_argv: list[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` when ``orig_argv`` is exactly ``python -m stages.<name> args...``, else ``None`` (an
    interpreter option such as ``-X importtime`` or ``-O`` keeps the run cold)."""
    if len(orig_argv) >= 3 and orig_argv[1] == "-m" and orig_argv[2].startswith(MODULE_PREFIX):
        return orig_argv[2], list(orig_argv[3:])
    return None


def hand_off_stage(no_wait: tuple[str, ...] = ()) -> None:
    """Run this stage process on the warm server and exit with its code; return to run it cold.

    While the server is still importing (it holds the lock on its ``.starting`` file) a stage waits for it,
    but the stages in ``no_wait``: those use no heavy library and start faster cold than they would wait.
    """
    path = os.environ.get(SOCKET_ENV)
    invocation = stage_invocation(list(getattr(sys, "orig_argv", [])))
    if not path or invocation is None:
        return
    if not os.path.exists(path) and (invocation[0] in no_wait or not wait_for_server(path)):
        return
    code = run_on_server(path, *invocation)
    if code is not None:
        raise SystemExit(code)


def wait_for_server(path: str, timeout_s: float = WAIT_S) -> bool:
    """Wait until the socket ``path`` exists while the server that is making it is alive (it holds an exclusive
    lock on ``<path>.starting`` until then); ``False`` when there is no such server, it died, or ``timeout_s``
    passed."""
    starting = path + STARTING_SUFFIX
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        try:
            with open(starting, encoding="utf-8") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass  # the server holds it: still importing
                else:
                    return os.path.exists(path)  # nobody holds it: the server died (or just finished)
        except OSError:
            return os.path.exists(path)  # no server starting (or it just finished: the socket is there)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def run_on_server(path: str, module: str, args: list[str]) -> int | None:
    """Run ``python -m module args`` on the server at ``path``; its exit code, or ``None`` when it did not run
    there (a note on stderr says why: the caller runs it cold).

    The signals this process gets are caught from before the request is sent: one that comes before the stage's pid
    is passed on when the pid comes (a client that was slow to install its handlers died of a SIGTERM meant for the
    stage it had already handed over), and is taken by this process as it would have been when no stage runs."""
    child: dict[str, int | None] = {"pid": None, "signal": None}

    def forward(signum: int, _frame: object) -> None:
        child["signal"] = signum
        if child["pid"] is not None:
            os.kill(child["pid"], signum)

    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    last = None
    try:
        try:
            sock.connect(path)
            send_request(sock, this_request(module, args))
        except OSError as err:
            print(f"privaudit warm: {module} runs cold: the server at {path} is not reachable ({err})",
                  file=sys.stderr)
            return None
        first = recv_message(sock)
        if first is None or "pid" not in first:
            reason = (first or {}).get("refused", "the server closed the connection before the stage started")
            print(f"privaudit warm: {module} runs cold: {reason}", file=sys.stderr)
            return None
        child["pid"] = int(first["pid"])
        if child["signal"] is not None:  # a signal came before the pid did
            os.kill(child["pid"], child["signal"])
        last = recv_message(sock)
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if child["pid"] is None and child["signal"] is not None:  # no stage took it: this process's own, now
            os.kill(os.getpid(), child["signal"])
    if last is None or "exit" not in last:
        print(f"privaudit warm: {module} (pid {child['pid']}) ended without an exit status: the server stopped",
              file=sys.stderr)
        return 1
    code = int(last["exit"])
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
