"""Errors raised inside a user's ``kind: python`` code, reported as the user needs them.

An exception from a user's trainer, loader or model used to be taken for privaudit's own bad-input
message when it was a ``ValueError`` (only its text was printed: no defender, no file, no line) and
shown as a privaudit traceback otherwise. :func:`user_code` turns any exception raised inside user
code into a :class:`UserCodeError`: one line naming the defender, the user's file and line (the
innermost frame outside privaudit and the installed packages) and the exception, followed by the
user's own frames. The stage runner prints exactly that (``stages/_runner.py``).

It holds strings only, so it crosses process boundaries (joblib, Dask) intact.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["UserCodeError", "user_code", "user_frames"]

_PRIVAUDIT = str(Path(__file__).resolve().parents[1])


class UserCodeError(RuntimeError):
    """An exception from user code: :attr:`summary` (one line) and :attr:`frames` (the user's frames)."""

    def __init__(self, summary: str, frames: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.frames = frames

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (UserCodeError, (self.summary, self.frames))

    def __str__(self) -> str:
        return self.summary


def _is_user_frame(filename: str) -> bool:
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return not (path.startswith(_PRIVAUDIT) or "site-packages" in path or path.startswith(sys.prefix)
                or path.startswith(sys.base_prefix) or filename.startswith("<"))


def user_frames(err: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``err``'s traceback in the user's own code (outside privaudit, Python's import machinery, the
    standard library and the installed packages), outermost first."""
    return [f for f in traceback.extract_tb(err.__traceback__) if _is_user_frame(f.filename)]


@contextmanager
def user_code(defender: str, what: str) -> Iterator[None]:
    """Run a block that calls user code (``what``: e.g. ``"examples/x.py:train"``); any exception becomes a
    :class:`UserCodeError` naming ``defender``, the user's file:line and the exception.

    >>> try:
    ...     with user_code("mine", "my.py:train"):
    ...         raise ValueError("bad batch")
    ... except UserCodeError as e:
    ...     e.summary.startswith("defender 'mine': my.py:train raised ValueError: bad batch")
    True
    """
    try:
        yield
    except UserCodeError:
        raise
    except Exception as err:  # noqa: BLE001 - every exception of user code is reported the same way
        frames = user_frames(err)
        where = f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        text = str(err).splitlines()[0] if str(err) else ""
        summary = f"defender {defender!r}: {what} raised {type(err).__name__}: {text}{where}"
        raise UserCodeError(summary, "".join(traceback.format_list(frames))) from err
