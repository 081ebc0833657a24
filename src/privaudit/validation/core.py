"""Run a Great Expectations (1.x) suite on pandas DataFrames, in an ephemeral context.

The suite is built in code (no GX project directory to keep in sync); results become a
:class:`ValidationFailed` whose message names the suite, each failed expectation (its
human-readable description, GX type and arguments), and up to five offending rows.

:func:`check_suite` is what the per-stage builders call: it runs the suite, records every
outcome in the Data Docs under ``reports/validation/`` (see :mod:`privaudit.validation.docs`)
and raises on failure.

Each batch is validated for pass/fail first (GX ``result_format="BOOLEAN_ONLY"``) and validated again with
``"COMPLETE"`` (offending rows and values) only when it failed: the complete result format made GX compute the
unexpected-row metrics of every expectation, and validating the canary statistics took 0.53-0.60 s a table pair
that way against 0.28-0.38 s now (4 alternating runs of 4 each, 2 CPU cores); the default audit's 387 expectations
in 41 calls took 9.5 s before and 6.1 s after (one instrumented run each; ``benchmarks/bench_validation.py``: 1.5x
on the default audit's shapes). Outcomes are the same: a passing expectation reports nothing more.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Sequence

import pandas as pd

from privaudit.validation.docs import record
from privaudit.validation.outcomes import (
    MAX_ROWS_SHOWN,
    ExpectationFailure,
    ExpectationOutcome,
    ValidationFailed,
)

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

#: one ephemeral context and one pandas data source per process: each object added to a context re-serialises its
#: whole config (measured: 2.2 s of a canaries stage's 10 s of validation), so suites are validated on a batch
#: (``Batch.validate``) without being added, and data assets are added once per batch name
_CONTEXT: list[Any] = []
_RUN_COUNTER = [0]


def _context() -> Any:
    if _CONTEXT:
        return _CONTEXT[0]
    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import great_expectations as gx

    ctx = gx.get_context(mode="ephemeral")
    try:  # no progress bars in stage logs
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    except Exception:  # pragma: no cover - older/newer GX without this knob
        pass
    _CONTEXT.append(ctx)
    return ctx


@functools.cache
def _source() -> Any:
    """The process's pandas data source (adding one re-serialises the context's whole config: once)."""
    return _context().data_sources.add_pandas("privaudit")


@functools.cache
def _batch_definition(batch_name: str) -> Any:
    """One whole-dataframe batch definition per batch name and process (the frame is passed at each run)."""
    return _source().add_dataframe_asset(batch_name).add_batch_definition_whole_dataframe(f"{batch_name}-all")


def _plain(values: Sequence[Any]) -> list[Any]:
    """numpy scalars → Python scalars so messages read ``[3, 'a']`` rather than ``[np.int64(3)]``."""
    out = []
    for v in list(values)[:MAX_ROWS_SHOWN]:
        out.append(v.item() if hasattr(v, "item") and callable(v.item) else v)
    return out


def evaluate_suite(
    suite_name: str,
    batches: dict[str, pd.DataFrame],
    expectations: dict[str, list[Any]],
) -> list[ExpectationOutcome]:
    """Validate each named batch against its GX expectation objects; every outcome, in order."""
    import great_expectations as gx

    _context()  # GX needs an active context before a suite takes expectations
    _RUN_COUNTER[0] += 1
    run_id = f"{suite_name}-{_RUN_COUNTER[0]}"
    outcomes: list[ExpectationOutcome] = []
    for batch_name, frame in batches.items():
        exps = expectations.get(batch_name, [])
        if not exps:
            continue
        suite = gx.ExpectationSuite(name=f"{run_id}.{batch_name}")  # not stored in the context: nothing to save
        for e in exps:
            suite.add_expectation(e)
        # unnamed index: GX then reports offending rows as index labels, not dicts
        batch = _batch_definition(batch_name).get_batch(batch_parameters={"dataframe": frame.rename_axis(None)})
        # pass/fail first; the offending rows and values only for a batch that failed (module docstring)
        result = batch.validate(suite, result_format="BOOLEAN_ONLY")
        if not result.success:
            result = batch.validate(suite, result_format="COMPLETE")
        for r in result.results:
            cfg = r.expectation_config
            kwargs = {k: v for k, v in cfg.kwargs.items() if k != "batch_id"}
            description = getattr(cfg, "description", None) or ""
            failure = None
            if not r.success:
                res = r.result or {}
                observed = res.get("observed_value")
                info = r.exception_info or {}
                if observed is None and info.get("raised_exception"):
                    observed = f"error: {info.get('exception_message')}"
                failure = ExpectationFailure(
                    suite=suite_name,
                    batch=batch_name,
                    expectation=cfg.type,
                    kwargs=kwargs,
                    observed=observed,
                    offending_rows=_plain(res.get("unexpected_index_list") or []),
                    offending_values=_plain(res.get("partial_unexpected_list") or []),
                    description=description,
                    missing_values=_plain(res.get("partial_missing_list") or []),
                )
            outcomes.append(ExpectationOutcome(batch_name, cfg.type, description, kwargs, bool(r.success), failure))
    return outcomes


def check_suite(
    suite_name: str,
    batches: dict[str, pd.DataFrame],
    expectations: dict[str, list[Any]],
    subject: str = "",
) -> None:
    """Run the suite, record it in the Data Docs, raise :class:`ValidationFailed` on any failure.

    Args:
        subject: what was validated (e.g. ``"defender logreg"``), shown in the Data Docs.
    """
    outcomes = evaluate_suite(suite_name, batches, expectations)
    record(suite_name, subject, {b: len(f) for b, f in batches.items()}, outcomes)
    failures = [o.failure for o in outcomes if o.failure is not None]
    if failures:
        raise ValidationFailed(suite_name, failures)
