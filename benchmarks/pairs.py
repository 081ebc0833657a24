"""The summary of a benchmark that times two arms in alternating pairs (the plain way and privaudit's): the machine,
each arm's seconds and median, and the ratio per pair — one writer for ``bench_worker_pool.py`` and
``bench_stage_exit.py``."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path


def pair_summary(title: str, plain: tuple[str, Sequence[float]], ours: tuple[str, Sequence[float]], load_before: float,
                 digits: int = 2) -> str:
    """The lines of the summary; ``plain`` and ``ours``: (label, seconds per pair), the ratio is plain / ours."""
    width = max(len(plain[0]), len(ours[0]))
    ratios = [a / b for a, b in zip(plain[1], ours[1])]

    def arm(label: str, values: Sequence[float]) -> str:
        return (f"{label:<{width}}  s: {', '.join(f'{v:.{digits}f}' for v in values)}; "
                f"median {statistics.median(values):.{digits}f}")

    return "\n".join([
        title,
        f"machine: {platform.machine()}, {os.cpu_count()} cores visible, python {platform.python_version()}; "
        f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f}",
        arm(*plain), arm(*ours),
        f"ratio per pair: {', '.join(f'{r:.1f}' for r in ratios)}; median {statistics.median(ratios):.1f}x",
    ])


def report(text: str, out: Path | None) -> None:
    """Print the summary and write it to ``out`` when given."""
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
