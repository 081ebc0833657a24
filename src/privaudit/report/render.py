"""Build the audit report: ``audit.html`` (self-contained) and ``audit.md`` (+ PNGs).

Both files are emitted from one document model (sections of paragraphs, tables, figures
and "not computed" notes), so they always say the same thing. Order: verdict, per-defender
table, theoretical bounds, plots (with the most exposed sample ids and ROC statistics),
LTU Table 1, provenance manifest. Every string that comes from the inputs is escaped
(HTML-escaped in the HTML; HTML- and Markdown-escaped in the Markdown).
"""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

from privaudit.artifacts import atomic_file
from privaudit.report.document import MISSING, Block, Figure, Note, Section, Verdict
from privaudit.report.inputs import ReportInputs
from privaudit.report.plots import render_plots, write_plot_files
from privaudit.report.sections import build_document
from privaudit.report.tables import check_most_exposed
from privaudit.report.templates import CSS, PAGE

__all__ = [
    "DEFAULT_TITLE",
    "MISSING",
    "build_document",
    "build_report",
    "render_html",
    "render_markdown",
]

DEFAULT_TITLE = "privaudit — membership-inference audit"


def _h(text: str) -> str:
    """HTML-escape text (quotes included)."""
    return html.escape(text, quote=True)


def _anchor(title: str) -> str:
    """An id for a section title."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def _html_warnings(warnings: list[str]) -> str:
    """The gate's warnings as an amber box (empty string when there is none)."""
    if not warnings:
        return ""
    items = "".join(f'<li><span class="tag">WARNING</span> {_h(w)}</li>' for w in warnings)
    return f'<div class="warnings" id="warnings"><ul>{items}</ul></div>'


def _html_block(block: Block) -> str:
    """One block as HTML."""
    if isinstance(block, Verdict):
        if block.passed is None:
            return (
                '<div class="verdict verdict-unknown" id="verdict"><span class="word">NO VERDICT</span>'
                f'<span class="lead">release gate: {_h(MISSING)}</span></div>'
            )
        word, cls = ("PASS", "verdict-pass") if block.passed else ("FAIL", "verdict-fail")
        lead = "release gate passed" if block.passed else "release gate failed"
        if block.passed and block.no_claim:
            cls, lead = "verdict-pass-noclaim", "no DP claim: only the LTU floors were checked, no ε is certified"
        reasons = "".join(f"<li>{_h(r)}</li>" for r in block.reasons)
        reasons += "".join(
            f'<li class="defender"><span class="chip chip-{_h(line.state)}">{_h(line.label)}</span> '
            f"<b>{_h(line.name)}</b>: {_h(line.text)}</li>" for line in block.lines)
        items = f"<ul>{reasons}</ul>" if reasons else ""
        return (
            f'<div class="verdict {cls}" id="verdict"><span class="word">{word}</span>'
            f'<span class="lead">{_h(lead)}</span>{items}</div>'
        ) + _html_warnings(block.warnings)
    if isinstance(block, Note):
        return (
            f'<p class="missing">{_h(block.text)}</p>'
            if block.missing
            else f"<p>{_h(block.text)}</p>"
        )
    if isinstance(block, Figure):
        assert block.data is not None
        b64 = base64.b64encode(block.data).decode("ascii")
        return (
            f'<figure><img src="data:image/png;base64,{b64}" alt="{_h(block.title)}" '
            f'data-plot="{_h(block.name)}"><figcaption>{_h(block.caption)}</figcaption></figure>'
        )
    head = "".join(f"<th>{_h(c)}</th>" for c in block.columns)
    body = []
    for row in block.rows:
        cells = []
        for cell in row:
            classes = " ".join(x for x in (cell.cls, "num" if cell.numeric else "") if x)
            attr = f' class="{classes}"' if classes else ""
            cells.append(f"<td{attr}>{'<br>'.join(_h(line) for line in cell.lines)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    caption = f"<caption>{_h(block.caption)}</caption>" if block.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(sections: list[Section], title: str = DEFAULT_TITLE) -> str:
    """The whole self-contained HTML page."""
    nav = " ".join(
        f'<a href="#{_anchor(s.title)}">{_h(s.title)}</a>'
        for s in sections
        if s.level == 2 and s.title != "Verdict"
    )
    parts = [
        f"<h1>{_h(title)}</h1>",
        # the history stage writes history.html beside this page after every run (privaudit.history)
        f'<p class="subtitle">Release gate report. <nav>{nav} <a href="history.html">Audit history</a></nav></p>',
    ]
    for section in sections:
        tag = f"h{section.level}"
        if section.title != "Verdict":
            parts.append(f'<{tag} id="{_anchor(section.title)}">{_h(section.title)}</{tag}>')
        parts.extend(_html_block(b) for b in section.blocks)
    return PAGE.format(title=_h(title), css=CSS, body="\n".join(parts))


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def _md(text: str) -> str:
    """Escape text for Markdown: HTML entities for ``& < >``, backslash for ``\\ ` * _ [ ] | #``,
    newlines folded into spaces."""
    escaped = html.escape(text, quote=False)
    return _MD_SPECIAL.sub(r"\\\1", escaped).replace("\r", " ").replace("\n", " ")


def _md_block(block: Block, plots_rel: str) -> str:
    """One block as Markdown."""
    if isinstance(block, Verdict):
        if block.passed is None:
            return f"## Verdict: NO VERDICT\n\nRelease gate: {MISSING}."
        word = "PASS" if block.passed else "FAIL"
        lines = [f"## Verdict: **{word}**" + (" — no DP claim, no ε certified" if block.passed and block.no_claim
                                               else ""), ""]
        if block.warnings:  # one quoted paragraph per warning, before the reasons
            lines += ["\n>\n".join(f"> **WARNING** {_md(w)}" for w in block.warnings), ""]
        items = [f"- {_md(r)}" for r in block.reasons]
        items += [f"- **{_md(line.label)}** {_md(line.name)}: {_md(line.text)}" for line in block.lines]
        lines += items or ["All gate checks passed."]
        return "\n".join(lines)
    if isinstance(block, Note):
        return f"> _{_md(block.text)}_" if block.missing else _md(block.text)
    if isinstance(block, Figure):
        return f"![{_md(block.title)}]({plots_rel}/{block.name}.png)\n\n_{_md(block.caption)}_"
    lines = []
    if block.caption:
        lines += [f"_{_md(block.caption)}_", ""]
    lines.append("| " + " | ".join(_md(c) for c in block.columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in block.columns) + "|")
    for row in block.rows:
        cells = []
        for cell in row:
            text = "<br>".join(_md(line) for line in cell.lines)
            cells.append(f"**{text}**" if cell.cls in ("flag", "fail", "pass") else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(
    sections: list[Section],
    plots_rel: str = "plots",
    title: str = DEFAULT_TITLE,
) -> str:
    """The Markdown report; figures link to ``<plots_rel>/<name>.png``."""
    parts = [f"# {_md(title)}"]
    for section in sections:
        if section.title != "Verdict":
            parts.append(f"{'#' * section.level} {_md(section.title)}")
        parts.extend(_md_block(b, plots_rel) for b in section.blocks)
    return "\n\n".join(parts) + "\n"


def _write_text(path: Path, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``, readable by all (reports are meant to be shared)."""
    with atomic_file(path, "wb") as fh:
        os.fchmod(fh.fileno(), 0o644)
        fh.write(text.encode("utf-8"))
    return path


def build_report(
    inputs: ReportInputs,
    out_dir: str | Path,
    plots_subdir: str = "plots",
    *,
    title: str = DEFAULT_TITLE,
    most_exposed: int = 10,
    workers: int = 1,
) -> dict[str, Path]:
    """Write ``audit.html``, ``audit.md`` and the plot files under ``out_dir``.

    Everything is rendered in memory first; then the plots folder, ``audit.html`` and ``audit.md``
    each replace their previous version atomically.

    Args:
        inputs: the metrics, manifest and optional tables.
        out_dir: the report folder (e.g. ``reports/``); created if needed.
        plots_subdir: folder under ``out_dir`` for PNGs and CSVs (linked from ``audit.md``).
        title: page title (``report.title``).
        most_exposed: sample ids listed per defender as most exposed (``report.most_exposed``;
            0 lists none).
        workers: processes that draw the figures (``compute.n_jobs``; :func:`render_plots`).

    Returns:
        ``{"html": ..., "md": ..., "plots_dir": ..., "plots/<file>": ...}`` for every file
        written.

    Raises:
        ValueError: ``plots_subdir`` is not a plain relative folder name, or ``most_exposed``
            is not an integer >= 0.
    """
    if not plots_subdir or Path(plots_subdir).is_absolute() or ".." in Path(plots_subdir).parts:
        raise ValueError(
            f"plots_subdir must be a relative folder inside out_dir, got {plots_subdir!r}"
        )
    check_most_exposed(most_exposed)
    out_dir = Path(out_dir)
    plots_dir = out_dir / plots_subdir
    pngs = render_plots(inputs, workers)
    sections = build_document(inputs, pngs, most_exposed=most_exposed)
    page = render_html(sections, title=title)
    markdown = render_markdown(sections, Path(plots_subdir).as_posix(), title=title)
    written = write_plot_files(inputs, plots_dir, pngs, most_exposed_k=most_exposed)
    html_path = _write_text(out_dir / "audit.html", page)
    md_path = _write_text(out_dir / "audit.md", markdown)
    result: dict[str, Path] = {"html": html_path, "md": md_path, "plots_dir": plots_dir}
    for path in written:
        result[path.relative_to(out_dir).as_posix()] = path
    return result
