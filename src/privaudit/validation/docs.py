"""Data Docs: a small static HTML site of the latest validation results, in ``reports/validation/``.

Why our own HTML rather than GX's site builder: the suites run in an *ephemeral* GX context
inside each stage process, so GX's stores (and therefore its ``index.html``) only ever know the
suites of the current process — every stage would overwrite the others' pages — and building
the GX site costs seconds per stage. Here each suite gets ``<suite>.html`` plus ``<suite>.json``
(every expectation of its latest runs, pass or fail, with offending rows), and ``index.html`` is
rebuilt from all ``*.json`` present, so the site always shows the latest run of every suite.

The folder is ``$PRIVAUDIT_VALIDATION_DOCS`` if set (``off`` or empty disables the docs),
else ``reports/validation`` under the working directory (the DVC project root for stages).
Writing the docs is best effort: an unwritable docs folder logs a warning, it never fails or
masks a validation result. Files are replaced atomically.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from privaudit.artifacts import atomic_file, read_json
from privaudit.validation.outcomes import ExpectationOutcome, short_repr

ENV_VAR = "PRIVAUDIT_VALIDATION_DOCS"
DEFAULT_DIR = Path("reports/validation")
log = logging.getLogger(__name__)

# runs recorded by this process, per suite (a stage may validate several subjects)
_RUNS: dict[str, list[dict[str, Any]]] = {}

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;width:100%;margin-bottom:1.5em}"
    "td,th{border:1px solid #ccc;padding:4px 6px;text-align:left;vertical-align:top;font-size:90%}"
    ".ok{color:#1a7f37}.fail{color:#cf222e;font-weight:bold}code{font-size:90%}"
)


def docs_dir() -> Path | None:
    """Where the Data Docs go, or ``None`` when disabled (see module docstring)."""
    value = os.environ.get(ENV_VAR)
    if value is None:
        return DEFAULT_DIR
    if value.strip().lower() in ("", "off", "0", "false", "none"):
        return None
    return Path(value)


def _stage_name() -> str:
    arg0 = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    return arg0 if arg0 and arg0 not in ("-c", "__main__", "pytest") else "library call"


def record(
    suite: str, subject: str, batch_rows: dict[str, int], outcomes: Sequence[ExpectationOutcome]
) -> None:
    """Add one suite run to this process's runs and rewrite the suite's page and the index."""
    run = {
        "subject": subject,
        "stage": _stage_name(),
        "time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "success": all(o.success for o in outcomes),
        "batches": batch_rows,
        "results": [
            {
                "batch": o.batch,
                "expectation": o.expectation,
                "description": o.description,
                "kwargs": {k: short_repr(v) for k, v in o.kwargs.items()},
                "success": o.success,
                "detail": o.failure.describe() if o.failure else "",
            }
            for o in outcomes
        ],
    }
    _RUNS.setdefault(suite, []).append(run)
    target = docs_dir()
    if target is None:
        return
    try:
        write_site(target, suite, _RUNS[suite])
    except OSError as err:  # best effort: never hide the validation result itself
        log.warning("validation Data Docs not written to %s: %s", target, err)


def write_site(target: Path, suite: str, runs: list[dict[str, Any]]) -> None:
    """Write ``<suite>.json``, ``<suite>.html`` and rebuild ``index.html`` in ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with atomic_file(target / f"{suite}.json") as fh:
        fh.write(json.dumps({"suite": suite, "runs": runs}, indent=2, default=str))
    with atomic_file(target / f"{suite}.html") as fh:
        fh.write(_suite_page(suite, runs))
    summaries = []
    for path in sorted(target.glob("*.json")):
        try:
            data = read_json(path)
            summaries.append((data["suite"], data["runs"]))
        except (ValueError, KeyError, OSError):
            continue
    with atomic_file(target / "index.html") as fh:
        fh.write(_index_page(summaries))


def _status(ok: bool) -> str:
    return '<span class="ok">passed</span>' if ok else '<span class="fail">FAILED</span>'


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>\n")


def _suite_page(suite: str, runs: list[dict[str, Any]]) -> str:
    parts = [f"<p><a href='index.html'>all suites</a></p><h1>Suite <code>{html.escape(suite)}</code></h1>"]
    for run in runs:
        head = (f"<h2>{_status(run['success'])} {html.escape(run['subject'] or suite)}</h2>"
                f"<p>stage <code>{html.escape(run['stage'])}</code>, {html.escape(run['time'])}; rows per batch: "
                f"{html.escape(', '.join(f'{b}={n}' for b, n in run['batches'].items()))}</p>")
        rows = "".join(
            f"<tr><td>{_status(r['success'])}</td><td>{html.escape(r['batch'])}</td>"
            f"<td>{html.escape(r['description'])}</td><td><code>{html.escape(r['expectation'])}</code><br>"
            f"<code>{html.escape(', '.join(f'{k}={v}' for k, v in r['kwargs'].items()))}</code></td>"
            f"<td>{html.escape(r['detail'])}</td></tr>"
            for r in run["results"]
        )
        parts.append(head + "<table><tr><th>status</th><th>batch</th><th>check</th><th>expectation</th>"
                     f"<th>failure detail</th></tr>{rows}</table>")
    return _page(f"validation: {suite}", "".join(parts))


def _index_page(summaries: list[tuple[str, list[dict[str, Any]]]]) -> str:
    rows = "".join(
        f"<tr><td><a href='{html.escape(s)}.html'>{html.escape(s)}</a></td>"
        f"<td>{_status(all(r['success'] for r in runs))}</td>"
        f"<td>{html.escape(', '.join(sorted({r['stage'] for r in runs})))}</td>"
        f"<td>{html.escape(runs[-1]['time'] if runs else '')}</td>"
        f"<td>{sum(len(r['results']) for r in runs)}</td></tr>"
        for s, runs in summaries
    )
    body = ("<h1>privaudit validation results</h1><p>Latest run of each Great Expectations suite "
            "(built in code, <code>privaudit.validation</code>).</p><table><tr><th>suite</th><th>status</th>"
            f"<th>stage</th><th>last run</th><th>expectations</th></tr>{rows}</table>")
    return _page("privaudit validation", body)
