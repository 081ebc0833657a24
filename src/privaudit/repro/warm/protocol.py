"""What the warm stage client and server say to each other (stdlib only: the client imports nothing heavy).

One Unix-socket connection per stage run. The client sends a request (a 4-byte big-endian length with its
three standard-stream file descriptors attached, then that many bytes of JSON: :class:`Request`); the
server answers with JSON lines, each a length-prefixed message: ``{"pid": N}`` once the child runs, then
``{"exit": CODE}`` when it has ended (CODE as :func:`os.waitstatus_to_exitcode`: negative for a signal), or
``{"refused": REASON}`` instead of both when it will not run the request (the client then runs cold).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from dataclasses import asdict, dataclass

#: environment variable naming the server's socket (set by ``privaudit warm``)
SOCKET_ENV = "PRIVAUDIT_WARM_SOCKET"
PROTOCOL_VERSION = 2
#: ``<socket><suffix>``: locked (``flock``) by the server while it imports, before the socket exists
STARTING_SUFFIX = ".starting"
#: environment variable the client adds to its request: its pid, so that the stage counts its wall from the start
#: of the process DVC launched (:func:`privaudit.planning.timings.process_seconds`), not from the fork
CLIENT_ENV = "PRIVAUDIT_WARM_CLIENT"
#: only these modules are run warm
MODULE_PREFIX = "stages."
#: environment read when the interpreter or a preloaded library starts: a client whose values differ from the
#: server's runs cold (``PYTHON*`` is compared too, but for ``PYTHONPATH``, which the child applies itself)
STARTUP_ENV: tuple[str, ...] = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "LD_LIBRARY_PATH", "MPLBACKEND", "MPLCONFIGDIR",
)
_LEN = struct.Struct(">I")


@dataclass(frozen=True)
class Request:
    """One stage run: ``python -m <module> <args...>`` in ``cwd`` with ``env``, by ``executable`` of the environment
    ``prefix`` (``sys.prefix``: a virtual environment's folder)."""

    version: int
    executable: str
    prefix: str
    module: str
    args: list[str]
    cwd: str
    env: dict[str, str]


def startup_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` a running interpreter cannot take back: ``PYTHON*`` (but ``PYTHONPATH``) and
    :data:`STARTUP_ENV`."""
    return {k: v for k, v in env.items()
            if (k.startswith("PYTHON") and k != "PYTHONPATH") or k in STARTUP_ENV}


def send_request(sock: socket.socket, request: Request) -> None:
    """Send ``request`` with this process's stdin, stdout and stderr attached."""
    body = json.dumps(asdict(request)).encode()
    socket.send_fds(sock, [_LEN.pack(len(body))], [0, 1, 2])
    sock.sendall(body)


def recv_request(sock: socket.socket) -> tuple[Request, list[int]]:
    """Receive a request and its three file descriptors (the caller owns and closes them).

    Raises:
        ValueError: a malformed request (wrong field set, no descriptors, short read).
    """
    head, fds, _flags, _addr = socket.recv_fds(sock, _LEN.size, 3)
    if len(head) != _LEN.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"malformed warm request: {len(head)} header bytes, {len(fds)} descriptors (want 4 and 3)")
    body = _recv_exact(sock, _LEN.unpack(head)[0])
    try:
        return Request(**json.loads(body)), fds
    except (TypeError, ValueError) as err:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"malformed warm request: {err}") from None


def send_message(sock: socket.socket, **message: object) -> None:
    """Send one length-prefixed JSON message."""
    body = json.dumps(message).encode()
    sock.sendall(_LEN.pack(len(body)) + body)


def recv_message(sock: socket.socket) -> dict | None:
    """The next message, or ``None`` when the peer closed the connection (or it broke)."""
    try:
        head = _recv_exact(sock, _LEN.size)
        return json.loads(_recv_exact(sock, _LEN.unpack(head)[0]))
    except (OSError, ValueError, EOFError):
        return None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def this_request(module: str, args: list[str]) -> Request:
    """The request that runs ``python -m module args`` as this process would."""
    return Request(version=PROTOCOL_VERSION, executable=sys.executable, prefix=sys.prefix, module=module, args=list(args),
                   cwd=os.getcwd(), env={**os.environ, CLIENT_ENV: str(os.getpid())})
