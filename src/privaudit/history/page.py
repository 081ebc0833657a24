"""``reports/history.html``: ε̂ and utility per defender over the recorded runs, regressions marked.

Self-contained (inline SVG and CSS, no script, no matplotlib), so the ``history`` stage stays cheap. Per
defender: one chart of every gated ε̂ over the runs (one line per bound kind, the claimed ε dashed,
a flagged run ringed in red), one of the LTU utility, then the latest :data:`TABLE_RUNS` runs newest first with
what changed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from privaudit.history.records import AuditRecord
from privaudit.history.regression import Regression

__all__ = ["render_history"]

#: runs listed in each defender's table, newest first (the charts show every run; `privaudit history` lists all)
TABLE_RUNS = 50
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2")
_W, _H, _PAD = 640, 220, 40

CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.2rem .4rem;
text-align:left;vertical-align:top}tr.regression td{background:#fde8e8}.flag{color:#b00020;font-weight:600}
.legend span{margin-right:1rem}svg{background:#fafafa;border:1px solid #ddd}.muted{color:#666}"""


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _chart(series: dict[str, list[float | None]], n: int, rings: set[tuple[str, int]], label: str,
           dashed: dict[str, list[float | None]] | None = None) -> str:
    """An SVG line chart of ``series`` over runs 0..n-1 (``None`` gaps), ``rings`` (series, run) circled red."""
    values = [v for s in (*series.values(), *(dashed or {}).values()) for v in s if v is not None and math.isfinite(v)]
    if not values:
        return f'<p class="muted">No {_h(label)} recorded.</p>'
    top = max(values) * 1.1 or 1.0
    bottom = min(0.0, min(values))

    def x(i: int) -> float:
        return _PAD + (i * (_W - 2 * _PAD) / max(n - 1, 1))

    def y(v: float) -> float:
        return _H - _PAD + (v - bottom) / (top - bottom) * (2 * _PAD - _H)

    parts = [f'<svg role="img" aria-label="{_h(label)}" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}">',
             f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#999"/>',
             f'<text x="4" y="{_PAD - 8}" font-size="11">{_h(label)}</text>',
             f'<text x="4" y="{y(top / 1.1):.1f}" font-size="10">{top / 1.1:.3g}</text>',
             f'<text x="4" y="{_H - _PAD:.1f}" font-size="10">{bottom:.3g}</text>',
             f'<text x="{_PAD}" y="{_H - 8}" font-size="10">run 1</text>',
             f'<text x="{_W - _PAD - 30}" y="{_H - 8}" font-size="10">run {n}</text>']
    legend = []
    for k, (name, points) in enumerate([*series.items(), *(dashed or {}).items()]):
        colour = _COLOURS[k % len(_COLOURS)] if name in series else "#555"
        dash = ' stroke-dasharray="5,4"' if name not in series else ""
        coords = [(x(i), y(v)) for i, v in enumerate(points) if v is not None and math.isfinite(v)]
        if len(coords) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{path}"/>')
        for i, v in enumerate(points):
            if v is None or not math.isfinite(v):
                continue
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"><title>{_h(name)} run {i + 1}: '
                         f'{v:.4g}</title></circle>')
            if (name, i) in rings:
                parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="7" fill="none" stroke="#d00" stroke-width="2">'
                             f'<title>regression: {_h(name)} run {i + 1}</title></circle>')
        legend.append(f'<span style="color:{colour}">{"┅" if dash else "━"} {_h(name)}</span>')
    parts.append("</svg>")
    return "".join(parts) + f'<div class="legend">{"".join(legend)}</div>'


def _defender_section(name: str, records: Sequence[AuditRecord], flagged: list[Regression]) -> str:
    runs = [r.defenders.get(name) for r in records]
    kinds = list(dict.fromkeys(b.kind for d in runs if d is not None for b in d.eps_hat))
    eps = {k: [None if d is None or d.bound(k) is None else d.bound(k).epsilon for d in runs]  # type: ignore[union-attr]
           for k in kinds}
    claimed = {"claimed ε": [None if d is None else d.claimed_epsilon for d in runs]}
    rings = {(g.kind, g.record) for g in flagged}
    utility = {"utility (test accuracy)": [None if d is None else d.utility for d in runs]}
    rows = []
    for i in reversed(range(max(0, len(records) - TABLE_RUNS), len(records))):
        d, rec = runs[i], records[i]
        if d is None:
            continue
        mine = [g for g in flagged if g.record == i]
        bounds = "<br>".join(f"{_h(b.kind)} {_fmt(b.epsilon)} (level {_fmt(b.level)}; detectable {_fmt(b.detectable_epsilon)})"
                             for b in d.eps_hat) or "–"
        flags = "<br>".join(f'<span class="flag">regression</span> {_h(g.text())}' for g in mine)
        cls = ' class="regression"' if mine else ""
        commit = (rec.commit or "no commit")[:12] + (" (dirty)" if rec.dirty else "")
        rows.append(f"<tr{cls}><td>{i + 1}</td><td>{_h(rec.when.strftime('%Y-%m-%d %H:%M:%SZ'))}</td><td>{_h(rec.trigger)}"
                    f"</td><td>{_h(commit)}</td><td>{_h(d.verdict)}</td><td>{bounds}</td><td>{_fmt(d.utility)}</td>"
                    f"<td>{flags}</td></tr>")
    table = ("<table><thead><tr><th>Run</th><th>When (UTC)</th><th>Trigger</th><th>Commit</th><th>Verdict</th>"
             "<th>Gated ε̂ (level; detectable ε)</th><th>Utility</th><th>Regression</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>"
             + (f'<p class="muted">The {TABLE_RUNS} latest runs; <code>privaudit history</code> lists all '
                f"{len(records)}.</p>" if len(records) > TABLE_RUNS else ""))
    return (f'<h2 id="{_h(name)}">{_h(name)}</h2>'
            + _chart(eps, len(records), rings, "gated ε̂ per bound", dashed=claimed)
            + _chart(utility, len(records), set(), "LTU utility (test accuracy)") + table)


def render_history(records: Sequence[AuditRecord], regressions: Sequence[Regression],
                   title: str = "privaudit audit history") -> str:
    """The whole page (see the module doc)."""
    defenders = list(dict.fromkeys(n for r in records for n in r.defenders))
    latest = [g for g in regressions if records and g.record == len(records) - 1]
    head = (f"<p>{len(records)} recorded run(s) on <code>refs/privaudit/history</code>"
            + (f", last {_h(records[-1].when.strftime('%Y-%m-%d %H:%M:%SZ'))} ({_h(records[-1].trigger)})" if records else "")
            + f'. <a href="audit.html">The latest audit report</a>.</p>')
    if latest:
        head += "".join(f'<p class="flag">Regression in the latest run: {_h(g.text())}</p>' for g in latest)
    elif records:
        head += "<p>No regression in the latest run.</p>"
    body = "".join(_defender_section(n, records, [g for g in regressions if g.defender == n]) for n in defenders)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_h(title)}</title>'
            f"<style>{CSS}</style></head><body><h1>{_h(title)}</h1>{head}{body}</body></html>\n")
