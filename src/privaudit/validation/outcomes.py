"""What a Great Expectations suite run produced: failures, outcomes and the exception they raise.

Shared by :mod:`privaudit.validation.core` (which runs suites) and
:mod:`privaudit.validation.docs` (which records outcomes in the Data Docs), so neither imports
the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

MAX_ROWS_SHOWN = 5
MAX_ARG_CHARS = 80


def short_repr(value: Any) -> str:
    if isinstance(value, float) and value >= 1.7976931348623157e308:
        return "<largest finite float>"
    text = repr(value)
    return text if len(text) <= MAX_ARG_CHARS else text[: MAX_ARG_CHARS - 5] + " ...]"


@dataclass(frozen=True)
class ExpectationFailure:
    """One failed expectation: its GX type, its arguments and a few offending values/rows."""

    suite: str
    batch: str
    expectation: str
    kwargs: dict[str, Any]
    observed: Any = None
    offending_rows: list[Any] = field(default_factory=list)
    offending_values: list[Any] = field(default_factory=list)
    description: str = ""
    missing_values: list[Any] = field(default_factory=list)

    def describe(self) -> str:
        args = ", ".join(f"{k}={short_repr(v)}" for k, v in self.kwargs.items() if k not in {"batch_id"})
        what = f"{self.description}: " if self.description else ""
        text = f"[{self.suite}/{self.batch}] {what}{self.expectation}({args}) failed"
        if self.offending_rows:
            text += f"; offending rows {self.offending_rows[:MAX_ROWS_SHOWN]}"
        if self.offending_values:
            text += f"; offending values {self.offending_values[:MAX_ROWS_SHOWN]}"
        if self.missing_values:
            text += f"; missing values {self.missing_values[:MAX_ROWS_SHOWN]}"
        if self.observed is not None:
            text += f"; observed {short_repr(self.observed)}"
        return text


@dataclass(frozen=True)
class ExpectationOutcome:
    """One evaluated expectation (passed or not), as shown in the Data Docs."""

    batch: str
    expectation: str
    description: str
    kwargs: dict[str, Any]
    success: bool
    failure: ExpectationFailure | None = None


class ValidationFailed(ValueError):
    """A Great Expectations suite failed; ``failures`` lists what and where."""

    def __init__(self, suite: str, failures: Sequence[ExpectationFailure]) -> None:
        self.suite = suite
        self.failures = list(failures)
        lines = "\n  ".join(f.describe() for f in self.failures)
        super().__init__(f"validation suite {suite!r} failed:\n  {lines}")
