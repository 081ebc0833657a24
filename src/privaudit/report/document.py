"""The report's document model: sections of notes, tables, figures and the verdict.

Built once by :mod:`privaudit.report.sections` and emitted twice, as HTML and Markdown, by
:mod:`privaudit.report.render`, so both say the same thing. Cells hold plain text; escaping
happens in the emitters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MISSING",
    "Block",
    "Cell",
    "Figure",
    "Note",
    "Section",
    "Table",
    "Verdict",
    "VerdictLine",
    "cell",
    "num",
    "pm",
    "real",
]

#: What a section shows when its data is absent.
MISSING = "not computed in this audit"


@dataclass
class Cell:
    """A table cell: one or more lines of plain text and an optional CSS class."""

    lines: list[str]
    cls: str = ""
    numeric: bool = False


@dataclass
class Table:
    """A table with a header row."""

    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""


@dataclass
class Figure:
    """A PNG figure (``data`` is ``None`` when not computed)."""

    name: str
    title: str
    data: bytes | None
    caption: str = ""


@dataclass
class Note:
    """A paragraph; ``missing`` notes render as "not computed in this audit" boxes."""

    text: str
    missing: bool = False


@dataclass
class VerdictLine:
    """One defender under a passing verdict: its state (``pass``, ``pass-noclaim``, ...,
    :func:`privaudit.report.first_screen.defender_state`), the state's words and one line of why."""

    name: str
    state: str
    label: str
    text: str


@dataclass
class Verdict:
    """The gate verdict: ``passed`` is ``None`` when no gate result is available; ``warnings`` (the
    gate's, never a failure) are shown right below it. ``no_claim``: a PASS in which no defender has a
    DP claim (nothing is certified; shown differently from a certified PASS). ``lines``: per defender,
    shown under a PASS (a FAIL lists the failing reasons only)."""

    passed: bool | None
    reasons: list[str]
    warnings: list[str] = field(default_factory=list)
    no_claim: bool = False
    lines: list[VerdictLine] = field(default_factory=list)


Block = Note | Table | Figure | Verdict


@dataclass
class Section:
    """A titled section of blocks; ``level`` 2 or 3."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


def num(value: Any, digits: int = 3) -> str:
    """Format a number: None → "—", inf → "∞", else ``digits`` decimals."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if isinstance(value, int):
            return str(value)
        return f"{value:.{digits}f}"
    return str(value)


def pm(value: Any, stderr: Any) -> str:
    """``value ± stderr`` (stderr omitted when absent)."""
    if value is None:
        return "—"
    return num(value) if stderr is None else f"{num(value)} ± {num(stderr)}"


def real(value: Any) -> float | None:
    """``float(value)`` for real numbers (not bools), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def cell(*lines: Any, cls: str = "", numeric: bool = False) -> Cell:
    """Shorthand for a :class:`Cell` from values converted with ``str``."""
    return Cell([str(x) for x in lines], cls, numeric)
