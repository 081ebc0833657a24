"""Progress of long loops over fits: a tqdm bar with rate and ETA on a terminal, one line per finished
piece (shard, reference model) with the same numbers in logs, CI and Prefect runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["FitProgress", "terminal"]


def terminal() -> bool:
    """Whether progress should be a bar: stderr is a terminal and ``CI`` is unset (logs get lines)."""
    import os

    return sys.stderr.isatty() and not os.environ.get("CI")


class FitProgress:
    """Count finished work units of ``total``; ``advance(n, what)`` after each piece.

    With ``bar`` a tqdm bar shows rate and ETA (and a line per piece is not printed); without it each
    piece prints ``<desc>: <what> done; k of N <unit>s, rate, ETA`` to ``out`` (``print`` by default,
    so Prefect's log capture sees it). The clock is injectable for tests.
    """

    def __init__(self, desc: str, total: int, unit: str, *, bar: bool, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        self.desc, self.total, self.unit, self.done = desc, int(total), unit, 0
        self._out, self._clock, self._start = out, clock, clock()
        self._bar = None
        if bar and total:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=out or sys.stderr)

    def advance(self, n: int, what: str = "") -> None:
        """Record ``n`` more finished units (``what``: the piece, e.g. ``mine blackbox 0-32``)."""
        self.done += int(n)
        if self._bar is not None:
            self._bar.update(n)
            return
        elapsed = self._clock() - self._start
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        left = (self.total - self.done) / rate if rate > 0 and rate != float("inf") else 0.0
        print(f"{self.desc}: {what + ' done; ' if what else ''}{self.done} of {self.total} {self.unit}s, "
              f"{_rate(rate, self.unit)}, ETA {_clock_text(left)}", file=self._out or sys.stdout, flush=True)

    def __enter__(self) -> "FitProgress":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.close()


def _rate(rate: float, unit: str) -> str:
    if rate == float("inf"):
        return f"- {unit}s/s"
    return f"{rate:.3g} {unit}s/s" if rate >= 1 else f"{1 / rate:.3g} s/{unit}" if rate > 0 else f"0 {unit}s/s"


def _clock_text(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
