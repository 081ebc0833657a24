"""Run a Great Expectations (1.x) suite on a pandas DataFrame, in an ephemeral context.

The suite is built in code (no GX project directory to keep in sync); results become a
:class:`ValidationFailed` whose message names the suite, each failed expectation with its
arguments, and up to five offending rows.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

MAX_ROWS_SHOWN = 5


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

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if k not in {"batch_id"})
        text = f"[{self.suite}/{self.batch}] {self.expectation}({args}) failed"
        if self.offending_rows:
            text += f"; offending rows {self.offending_rows[:MAX_ROWS_SHOWN]}"
        if self.offending_values:
            text += f"; offending values {self.offending_values[:MAX_ROWS_SHOWN]}"
        if self.observed is not None:
            text += f"; observed {self.observed!r}"
        return text


class ValidationFailed(ValueError):
    """A Great Expectations suite failed; ``failures`` lists what and where."""

    def __init__(self, suite: str, failures: Sequence[ExpectationFailure]) -> None:
        self.suite = suite
        self.failures = list(failures)
        lines = "\n  ".join(f.describe() for f in self.failures)
        super().__init__(f"validation suite {suite!r} failed:\n  {lines}")


def _context() -> Any:
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    ctx = gx.get_context(mode="ephemeral")
    try:  # no progress bars in stage logs
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    except Exception:  # pragma: no cover - older/newer GX without this knob
        pass
    return ctx


def run_suite(
    suite_name: str,
    batches: dict[str, pd.DataFrame],
    expectations: dict[str, list[Any]],
) -> list[ExpectationFailure]:
    """Validate each named batch against its list of GX expectation objects.

    Args:
        suite_name: name shown in messages (e.g. ``"split"``).
        batches: batch name → DataFrame (e.g. ``{"membership": df, "defender": df_d}``).
        expectations: batch name → list of ``great_expectations.expectations.*`` objects.

    Returns:
        The failures (empty when everything passed); callers raise :class:`ValidationFailed`.
    """
    import great_expectations as gx

    ctx = _context()
    source = ctx.data_sources.add_pandas(f"{suite_name}-source")
    failures: list[ExpectationFailure] = []
    for batch_name, frame in batches.items():
        exps = expectations.get(batch_name, [])
        if not exps:
            continue
        asset = source.add_dataframe_asset(batch_name)
        batch_def = asset.add_batch_definition_whole_dataframe(f"{batch_name}-all")
        suite = ctx.suites.add(gx.ExpectationSuite(name=f"{suite_name}.{batch_name}"))
        for e in exps:
            suite.add_expectation(e)
        vd = ctx.validation_definitions.add(
            gx.ValidationDefinition(name=f"{suite_name}.{batch_name}", data=batch_def, suite=suite)
        )
        result = vd.run(batch_parameters={"dataframe": frame}, result_format="COMPLETE")
        for r in result.results:
            if r.success:
                continue
            cfg = r.expectation_config
            res = r.result or {}
            failures.append(
                ExpectationFailure(
                    suite=suite_name,
                    batch=batch_name,
                    expectation=cfg.type,
                    kwargs={k: v for k, v in cfg.kwargs.items() if k != "batch_id"},
                    observed=res.get("observed_value"),
                    offending_rows=list(res.get("unexpected_index_list") or [])[:MAX_ROWS_SHOWN],
                    offending_values=list(res.get("partial_unexpected_list") or [])[:MAX_ROWS_SHOWN],
                )
            )
    return failures
