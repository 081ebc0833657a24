"""Static parts of the HTML report: the inline stylesheet and the page skeleton.

The page has no scripts, no external stylesheet, font or image: it opens offline.
"""

from __future__ import annotations

__all__ = ["CSS", "PAGE"]

CSS: str = """
:root { --pass: #1b7f3b; --fail: #b3261e; --muted: #666; --line: #d0d4da; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 0 auto; padding: 1.5rem 2rem 4rem; max-width: 1180px; color: #1d1f23;
       line-height: 1.45; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 2px solid var(--line);
     padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
.subtitle { color: var(--muted); margin: 0 0 1rem; }
.verdict { border-radius: 10px; padding: 1rem 1.4rem; margin: 1rem 0 1.5rem; color: #fff; }
.verdict.verdict-pass { background: var(--pass); }
.verdict.verdict-fail { background: var(--fail); }
.verdict.verdict-unknown { background: #6b7280; }
.verdict.verdict-pass-noclaim { background: #fff; color: #1d1f23; border: 4px dashed var(--pass); }
.verdict.verdict-pass-noclaim .word { color: var(--pass); }
.verdict li.defender { list-style: none; margin-left: -1.3rem; }
.chip { display: inline-block; font-weight: 800; font-size: .85rem; letter-spacing: .04em; padding: .05rem .5rem;
        border-radius: 4px; margin-right: .35rem; }
.chip-pass { background: #fff; color: var(--pass); }
.chip-pass-noclaim { background: #fff; color: #1d1f23; border: 2px dashed var(--pass); }
.verdict-pass-noclaim .chip-pass-noclaim { background: #eef6f0; }
.chip-fail, .chip-not-audited { background: #fff; color: var(--fail); }
td.pass-noclaim { color: #1d1f23; font-weight: 700; background: #fff; outline: 2px dashed var(--pass);
                  outline-offset: -4px; }
.verdict .word { font-size: 2.6rem; font-weight: 800; letter-spacing: .08em; }
.verdict .lead { font-size: 1.05rem; margin-left: .8rem; }
.verdict ul { margin: .6rem 0 0; padding-left: 1.3rem; }
.verdict li { margin: .15rem 0; }
.warnings { border-radius: 10px; padding: .7rem 1.2rem; margin: -.8rem 0 1.5rem; background: #fff4e0;
            border: 2px solid #b26a00; color: #4a2f00; }
.warnings ul { margin: 0; padding-left: 0; list-style: none; }
.warnings li { margin: .3rem 0; }
.warnings .tag { background: #b26a00; color: #fff; font-weight: 800; letter-spacing: .05em;
                 padding: .05rem .45rem; border-radius: 4px; margin-right: .4rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; width: 100%; }
th, td { border: 1px solid var(--line); padding: .35rem .55rem; text-align: left;
         vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: .2rem 0; }
.pass { color: var(--pass); font-weight: 700; }
.fail { color: var(--fail); font-weight: 700; }
.flag { color: var(--fail); font-weight: 700; background: #fdecea; }
.muted { color: var(--muted); }
.missing { color: var(--muted); font-style: italic; background: var(--bg); padding: .5rem .8rem;
           border-left: 4px solid var(--line); }
figure { margin: .5rem 0 1.2rem; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: .85rem; }
code { background: var(--bg); padding: 0 .25rem; border-radius: 3px; }
nav a { margin-right: 1rem; }
@media print { .verdict, .warnings { -webkit-print-color-adjust: exact; print-color-adjust: exact; } }
"""

#: Page skeleton; ``{title}``, ``{css}`` and ``{body}`` are filled in (title escaped).
PAGE: str = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
</body>
</html>
"""
