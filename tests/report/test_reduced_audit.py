"""Issue 43: a black-box audit smaller than the params' default (a user who chose fewer runs to fit
compute.budget_minutes) is said on the report's first screen and by `privaudit verdict`, with the ε it can
still detect and the ε the default size would detect; it never changes pass/fail."""

from __future__ import annotations

import io
from typing import Any

from privaudit.cli import print_verdict
from privaudit.report import ReportInputs
from privaudit.report.render import build_document, render_html, render_markdown
from tests.report import synthetic

REDUCED = {"params_key": "blackbox.sequential_runs", "runs_per_side": 96, "default_runs_per_side": 320,
           "detectable_epsilon": 5.7, "detectable_epsilon_default": 3.1}
TEXT = ("defender dp_sgd: smaller black-box audit: 96 runs per side (blackbox.sequential_runs; default 320): "
        "it detects only eps >= 5.7 (at the default size: eps >= 3.1)")


def _metrics(reduced: bool) -> dict[str, Any]:
    m = synthetic.with_blackbox(synthetic.metrics())
    m["audit"]["dp_sgd"]["blackbox"]["reduced"] = REDUCED if reduced else None
    return m


def test_the_verdict_says_the_audit_was_smaller_and_what_it_cost() -> None:
    m = _metrics(True)
    gate = synthetic.gate_of(m)
    assert TEXT in gate.warnings
    assert gate.passed == synthetic.gate_of(_metrics(False)).passed  # a warning, never a failure
    out = io.StringIO()
    print_verdict(gate, out, use_rich=False)
    lines = out.getvalue().splitlines()
    assert f"WARNING: {TEXT}" in lines[:4]  # right after the verdict line


def test_the_report_first_screen_says_it() -> None:
    m = _metrics(True)
    document = build_document(ReportInputs(synthetic.typed(m), synthetic.gate_of(m), {}), {})
    html = render_html(document)
    assert "smaller black-box audit: 96 runs per side" in html
    assert html.index("smaller black-box audit") < html.index("<h2")  # in the verdict box, before any section
    assert "eps &gt;= 5.7" in html and "smaller black-box audit" in render_markdown(document)


def test_an_audit_at_the_default_size_says_nothing() -> None:
    gate = synthetic.gate_of(_metrics(False))
    assert not any("smaller black-box audit" in w for w in gate.warnings)
