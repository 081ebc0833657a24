"""Report rendering: self-contained HTML, embedded plots, escaping, absent sections, files."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from privaudit.config import ReportParams
from privaudit.claims.error_budget import BOUND_LABELS
from privaudit.verdict.metrics_files import AuditMetrics
from privaudit.report import MISSING, ReportInputs, build_report
from privaudit.report.plots import PLOT_NAMES, most_exposed, render_plots
from privaudit.report.document import Note, Table
from privaudit.report.render import build_document, render_html, render_markdown
from tests.report import synthetic

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One full report from the synthetic inputs (rendered once: plots take ~1 s)."""
    out = tmp_path_factory.mktemp("full") / "reports"
    paths = build_report(synthetic.report_inputs(), out)
    return {
        "paths": paths,
        "html": paths["html"].read_text(encoding="utf-8"),
        "md": paths["md"].read_text(encoding="utf-8"),
    }


def img_sources(html: str) -> list[str]:
    """The ``src`` of every ``<img>``."""
    return re.findall(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", html)


# --------------------------------------------------------------------------- self-contained HTML


def test_files_written(built: dict[str, Any]) -> None:
    paths = built["paths"]
    assert paths["html"].name == "audit.html" and paths["md"].name == "audit.md"
    for name in PLOT_NAMES:
        png = paths["plots_dir"] / f"{name}.png"
        assert png.read_bytes().startswith(PNG_MAGIC)
        assert paths[f"plots/{name}.png"] == png
    assert not list(paths["html"].parent.rglob("*.tmp"))


def test_html_has_no_external_resources(built: dict[str, Any]) -> None:
    html = built["html"]
    assert not re.search(r"\b(?:src|href)\s*=\s*[\"']?\s*(?:https?:)?//", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    assert "@import" not in html and "url(" not in html
    # anchors, and the one relative link to the audit history the history stage writes beside the report
    hrefs = re.findall(r"href=\"([^\"]*)\"", html)
    assert "history.html" in hrefs
    for href in hrefs:
        assert href.startswith("#") or href == "history.html", href


def test_every_plot_is_embedded_as_a_png_data_uri(built: dict[str, Any]) -> None:
    sources = img_sources(built["html"])
    assert len(sources) == len(PLOT_NAMES)
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG_MAGIC)
        with Image.open(io.BytesIO(data)) as image:
            assert image.width > 300 and image.height > 100
    for name in PLOT_NAMES:
        assert f'data-plot="{name}"' in built["html"]


def test_verdict_comes_first(built: dict[str, Any]) -> None:
    html = built["html"]
    verdict = html.index('class="verdict verdict-fail"')
    assert '<span class="word">FAIL</span>' in html
    order = [
        html.index(x) for x in ('id="per-defender-results"', "<img", 'id="provenance-manifest"')
    ]
    assert verdict < order[0] < order[1] < order[2]
    assert "logreg: LTU privacy (attacker model_diff) - stderr" in html[verdict : order[0]]


def test_per_defender_table_content(built: dict[str, Any]) -> None:
    html = built["html"]
    table = html[html.index("Per-defender results") :]
    # utility ± err, privacy ± err per attacker, claimed ε, Game-3 interval, LiDP with method
    assert "0.944 ± 0.073" in table
    assert "model_diff: 0.900 ± 0.070 (strongest)" in table and "gap: 0.960 ± 0.071" in table
    assert "none (not DP)" in table and ">1.00<" in table
    assert "[0.000, 1.600]" in table and "[2.100, 4.300]" in table
    assert "K=√n: 0.420" in table and "K=1: 0.050" in table
    assert "interval: order 2, wilson, β=0.05" in table
    for bound in ("Thudi", "Yeom", "Erlingsson", "Sablayrolles", "Izzo 1/2+η"):
        assert f"<th>{bound}</th>" in table
    assert "0.731" in table and "0.816" in table
    assert "no DP claim: no bound applies" in table and ">consistent<" in table


def test_sections_and_exposed_ids(built: dict[str, Any], inputs: ReportInputs) -> None:
    html = built["html"]
    for title in PLOT_NAMES.values():
        assert title in html
    top = most_exposed(inputs.privacy_scores, 10)
    for defender, frame in top.items():
        assert defender in html
        for sample_id in frame["id"]:
            assert sample_id in html
    assert "TPR @ 0.1% FPR" in html
    assert "LogisticRegression" in html and "random seed" in html  # Table 1
    assert "git_rev" in html and "3f2c1e9" in html and "params.dataset.name" in html
    assert MISSING not in html


def test_markdown_mirrors_html_and_links_pngs(built: dict[str, Any]) -> None:
    md, paths = built["md"], built["paths"]
    assert md.startswith("# privaudit")
    assert "## Verdict: **FAIL**" in md
    assert md.index("## Verdict") < md.index("## Per-defender results") < md.index("## Plots")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == sorted(f"plots/{n}.png" for n in PLOT_NAMES)
    for link in links:
        assert (paths["md"].parent / link).is_file()
    assert "data:image" not in md
    assert "dp\\_sgd" in md  # markdown-escaped underscore


# --------------------------------------------------------------------------- flags and escaping


def test_theory_violation_is_flagged() -> None:
    m = synthetic.metrics()
    m["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.80
    inputs = ReportInputs(metrics=synthetic.typed(m), gate=synthetic.gate_of(m), manifest={})
    document = build_document(inputs, {})  # no figures: the table is the point
    html = render_html(document)
    assert html.count('class="flag num"') == 3  # thudi, sablayrolles, izzo — not erlingsson/yeom
    assert "⚠ EXCEEDED" in html
    assert "empirical &gt; theoretical: implementation or accounting bug" in html
    md = render_markdown(document)
    assert "**0.731<br>⚠ EXCEEDED**" in md


def test_within_error_flag_is_distinguished() -> None:
    m = synthetic.metrics()
    m["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.745
    html = render_html(build_document(ReportInputs(synthetic.typed(m), synthetic.gate_of(m), {}), {}))
    assert "⚠ exceeded (within 1 s.e.)" in html and "⚠ EXCEEDED" not in html


EVIL = '<script>alert("x")</script>&<img src=http://evil.example/x.png>|`$x$`_*'


def test_every_input_string_is_escaped(tmp_path: Path) -> None:
    m = synthetic.metrics()
    for key in ("ltu", "audit", "bounds"):
        m[key][EVIL] = m[key].pop("logreg")
    m["ltu"][EVIL]["attackers"][EVIL] = m["ltu"][EVIL]["attackers"].pop("gap")
    scores = pd.DataFrame({"id": [EVIL, "s1"], "role": [EVIL, "reserved"], "score": [0.01, 0.9]})
    inputs = ReportInputs(
        metrics=synthetic.typed(m),
        gate=synthetic.gate_of(m),
        manifest={EVIL: {"nested": EVIL}, "list": [EVIL]},
        privacy_scores={EVIL: scores},
        table1=pd.DataFrame({"model": [EVIL], "privacy": [0.1]}),
    )
    paths = build_report(inputs, tmp_path / "r")
    html = paths["html"].read_text(encoding="utf-8")
    assert "<script" not in html
    assert "evil.example" not in img_sources(html)[0]
    assert not re.search(r"<img\b[^>]*src=http", html)
    assert (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&lt;img src=http://evil.example/x.png&gt;"
        in html
    )
    md = paths["md"].read_text(encoding="utf-8")
    assert "<script" not in md and "<img" not in md
    assert "&lt;script&gt;" in md and "\\|" in md and "\\`" in md
    # every table row has the same number of unescaped pipes as its header
    for block in re.findall(r"((?:^\|.*\|\n)+)", md, re.M):
        counts = {len(re.findall(r"(?<!\\)\|", line)) for line in block.splitlines()}
        assert len(counts) == 1, block
    csv = (paths["plots_dir"] / "most_exposed.csv").read_text(encoding="utf-8")
    assert "s1" in csv


# --------------------------------------------------------------------------- absent data


def test_absent_sections_render_not_computed(tmp_path: Path) -> None:
    m = synthetic.metrics()
    inputs = ReportInputs(metrics=AuditMetrics.parse(m["ltu"], {}, {}), gate=None, manifest={})
    paths = build_report(inputs, tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    assert "NO VERDICT" in html and 'class="verdict verdict-unknown"' in html
    # ε vs trials, trade-off, privacy scores, ROC, Table 1, manifest, bounds, DP-claims table, per-defender cells
    assert html.count(f'<p class="missing">{MISSING}</p>') == 7
    assert f"Theoretical membership-inference bounds: {MISSING}." in html
    assert len(img_sources(html)) == 1  # privacy vs utility only
    md = paths["md"].read_text(encoding="utf-8")
    assert md.count(f"> _{MISSING}_") == 7 and "Verdict: NO VERDICT" in md
    for name in PLOT_NAMES:  # placeholders keep dvc plots paths stable
        assert (paths["plots_dir"] / f"{name}.png").read_bytes().startswith(PNG_MAGIC)


def test_completely_empty_inputs(tmp_path: Path) -> None:
    paths = build_report(ReportInputs(AuditMetrics()), tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    assert "NO VERDICT" in html and "<img" not in html


def test_audit_only_point_is_plotted_without_trial_series() -> None:
    m = synthetic.metrics()
    pngs = render_plots(ReportInputs(synthetic.typed(m)))
    assert pngs["epsilon_vs_trials"] is not None and pngs["roc"] is None


# --------------------------------------------------------------------------- inputs validation


def test_bad_privacy_score_columns_name_the_column(metrics: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"privacy_scores\['logreg'\].*'role'"):
        ReportInputs(
            AuditMetrics.parse(metrics["ltu"], {}, {}),
            privacy_scores={"logreg": pd.DataFrame({"id": [1], "score": [0.2]})},
        )


def test_bad_roc_names_the_curve(metrics: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"roc\['logreg'\]\['gap'\].*differ in length"):
        ReportInputs(
            AuditMetrics.parse(metrics["ltu"], {}, {}), roc={"logreg": {"gap": {"fpr": [0, 1], "tpr": [1]}}}
        )


def test_bad_plots_subdir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plots_subdir"):
        build_report(ReportInputs(AuditMetrics()), tmp_path, plots_subdir="../elsewhere")


def test_title_and_most_exposed_options(tmp_path: Path) -> None:
    """``report.title`` and ``report.most_exposed`` reach the page and the CSV."""
    paths = build_report(
        synthetic.report_inputs(roc=None, epsilon_vs_trials=None),
        tmp_path,
        title="Release <audit> v2",
        most_exposed=3,
    )
    html = paths["html"].read_text(encoding="utf-8")
    assert "<title>Release &lt;audit&gt; v2</title>" in html
    assert "<h1>Release &lt;audit&gt; v2</h1>" in html
    assert paths["md"].read_text(encoding="utf-8").startswith("# Release &lt;audit&gt; v2\n")
    exposed = pd.read_csv(paths["plots_dir"] / "most_exposed.csv")
    assert exposed.groupby("defender").size().to_dict() == {"dp_sgd": 3, "logreg": 3}
    table = html[html.index("Most exposed sample ids") :]
    table = table[: table.index("</table>")]
    assert table.count("(defender, ") + table.count("(reserved, ") == 6


@pytest.mark.parametrize("bad", [-1, 2.5, True])
def test_most_exposed_must_be_a_non_negative_int(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ValueError, match="most_exposed must be an integer >= 0"):
        build_report(ReportInputs(AuditMetrics()), tmp_path, most_exposed=bad)
    assert not (tmp_path / "audit.html").exists()


def test_most_exposed_zero_lists_no_sample_ids(tmp_path: Path) -> None:
    """``report.most_exposed: 0`` (allowed by the config) renders the report without the id list."""
    assert ReportParams(most_exposed=0).most_exposed == 0
    paths = build_report(synthetic.report_inputs(), tmp_path, most_exposed=0)
    html = paths["html"].read_text(encoding="utf-8")
    assert "Most exposed sample ids: not listed (report.most_exposed = 0)." in html
    assert "Most exposed sample ids</th>" not in html
    assert "report.most\\_exposed = 0" in paths["md"].read_text(encoding="utf-8")
    exposed = pd.read_csv(paths["plots_dir"] / "most_exposed.csv")
    assert list(exposed.columns) == ["defender", "rank", "id", "role", "score"] and exposed.empty
    with pytest.raises(ValueError, match="most_exposed"):
        ReportParams(most_exposed=-1)


def test_table1_per_data_set_in_the_paper_layout(tmp_path: Path) -> None:
    """One Table 1 per data set: a row per model, utility and privacy ± s.e. per randomness level."""
    def frame(privacy: float) -> pd.DataFrame:
        return pd.DataFrame({
            "model": ["knn", "knn", "svc", "svc"], "randomness": ["fixed", "unseeded"] * 2,
            "utility": [0.9, 0.9, 0.95, 0.95], "utility_stderr": [0.02] * 4,
            "privacy": [privacy, 0.5, 0.0, 0.0], "privacy_stderr": [0.05] * 4,
            "trials": [3] * 4, "rounds": [40] * 4,
        })

    inputs = synthetic.report_inputs(table1={"digits": frame(0.123), "location": frame(0.777)})
    html = build_report(inputs, tmp_path / "r")["html"].read_text(encoding="utf-8")
    section = html[html.index("LTU Table 1 reproduction"):]
    assert "digits (3 trials × 40 rounds)" in section and "location (3 trials × 40 rounds)" in section
    assert "fixed privacy" in section and "unseeded utility" in section
    assert "0.123 ± 0.050" in section and "0.777 ± 0.050" in section
    assert section.index("0.123") < section.index("location") < section.index("0.777")
    with pytest.raises(ValueError, match=r"table1\['x'\]"):
        synthetic.report_inputs(table1={"x": [1, 2]})


# --------------------------------------------------------------------------- warnings and claim curves


def passing_with_warning() -> ReportInputs:
    """Report inputs whose gate passes with ``dp_bare``'s GDP-view warning (no ``logreg``)."""
    m = synthetic.with_blackbox(synthetic.metrics())
    for kind in ("ltu", "audit", "bounds"):
        del m[kind]["logreg"]
    metrics = synthetic.typed(m)
    return synthetic.report_inputs(metrics=metrics, gate=synthetic.gate_of(m), privacy_scores=None, roc=None)


def test_warning_is_on_the_first_screen(tmp_path: Path) -> None:
    inputs = passing_with_warning()
    assert inputs.gate is not None and inputs.gate.passed and len(inputs.gate.warnings) == 1
    paths = build_report(inputs, tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    verdict, box, first_heading = (html.index('class="verdict verdict-pass"'), html.index('class="warnings"'),
                                   html.index("<h2"))
    assert verdict < box < first_heading  # right under the verdict, before any other section
    shown = html[box:first_heading]
    assert '<span class="tag">WARNING</span> defender dp_bare: the GDP view' in shown
    assert "(defenders[i].mechanism, README &#x27;Declaring a mechanism&#x27;)" in shown  # escaped
    md = paths["md"].read_text(encoding="utf-8")
    warning = md.index("> **WARNING** defender dp\\_bare: the GDP view")
    assert md.index("## Verdict: **PASS**") < warning < md.index("\n## ", md.index("## Verdict") + 1)


def test_no_warning_no_warning_box(built: dict[str, Any]) -> None:
    assert 'class="warnings"' not in built["html"] and "**WARNING**" not in built["md"]


def claims_rows(inputs: ReportInputs) -> dict[tuple[str, str], dict[str, list[str]]]:
    """The DP-claims table as ``{(defender, bound label): {column: lines}}``."""
    section = next(s for s in build_document(inputs, {}) if s.title.startswith("DP claims"))
    table = next(b for b in section.blocks if isinstance(b, Table))
    notes = {n.text.split("] ", 1)[0] + "]": n.text.split("] ", 1)[1] for n in section.blocks
             if isinstance(n, Note) and n.text.startswith("[")}

    def threat(lines: list[str]) -> list[str]:  # the short label, then its numbered note's text, one part a line
        assert len(lines) == 1, lines  # one line per row: the long text is in the notes below the table
        label, _, ref = lines[0].rpartition(" [")
        if not label:
            return lines
        return [label] + notes["[" + ref].split(": ", 1)[1].split("; ")

    return {(r[0].lines[0], r[1].lines[0]): {c: threat(cell.lines) if c == "Threat model" else cell.lines
                                             for c, cell in zip(table.columns, r, strict=True)}
            for r in table.rows}


def test_claims_table_names_the_curve_each_bound_tests() -> None:
    rows = claims_rows(passing_with_warning())
    label = BOUND_LABELS["blackbox"]
    sg = rows[("dp_sgd", label)]
    assert sg["Tested against"] == ["subsampled Gaussian (PLD), sigma=4.65, q=0.0712, T=280"]
    threat = " | ".join(sg["Threat model"])
    assert "assumes: none beyond the claim: tested against subsampled Gaussian (PLD)" in threat
    assert "Gaussian (GDP view)" not in threat
    assert "certified point FPR ≤ 0.280, FNR ≤ 0.700: on or above the claimed curve" in threat
    assert "GDP view ε ≈ 0.193 (a diagnostic" in threat and "last-iterate ceiling" in threat
    bare = rows[("dp_bare", label)]
    assert bare["Tested against"] == ["(eps, delta) point"]
    assert "assumes: none beyond the claim: tested against (eps, delta) point" in bare["Threat model"]
    assert any("see the warning under the verdict" in line for line in bare["Threat model"])
    assert rows[("dp_sgd", BOUND_LABELS["lidp"])]["Tested against"] == ["(eps, delta) point"]
    assert rows[("dp_sgd", BOUND_LABELS["blackbox_rate"])]["Tested against"] == ["(eps, delta) point"]


def test_claims_table_of_an_older_blackbox_block_and_of_no_claim() -> None:
    m = synthetic.with_blackbox(synthetic.metrics(), bare=False)
    old = m["audit"]["dp_sgd"]["blackbox"]
    for key in ("curve", "curve_description", "refutes_claimed_curve", "claim_fpr_upper", "claim_fnr_upper"):
        del old[key]
    m["audit"]["logreg"]["blackbox"] = synthetic.bare_blackbox(warning=None)
    rows = claims_rows(ReportInputs(synthetic.typed(m)))
    label = BOUND_LABELS["blackbox"]
    assert rows[("dp_sgd", label)]["Tested against"] == [
        "Gaussian trade-off curve (GDP view; audit.json written before claim curves)"]
    assert "assumes: the trade-off curve (canary in vs out) is Gaussian (GDP view)" in rows[("dp_sgd", label)][
        "Threat model"]
    assert rows[("logreg", label)]["Tested against"] == ["no claim"]


def test_per_defender_claim_names_the_curve(built: dict[str, Any]) -> None:
    table = built["html"][built["html"].index("Per-defender results"):]
    assert "1.00<br>tested against: subsampled Gaussian (PLD), sigma=4.65, q=0.0712, T=280" in table
    assert "none (not DP)" in table


def test_lidp_cell_rounds_its_level() -> None:
    """Issue 34: the LiDP cell printed β=0.008333333333333333 and pushed the table off screen."""
    from privaudit.verdict.metrics_files import LidpBlock
    from privaudit.report.sections import _lidp_cell

    cell = _lidp_cell(LidpBlock(eps_lower_bound=0.4, eps_lower_bound_k1=0.1, trials=32, canaries=5, order=2,
                                method="wilson", beta=0.05 / 6))
    assert "interval: order 2, wilson, β=0.00833" in cell.lines


def test_first_screen_says_which_data_and_what_each_verdict_is_about(built: dict[str, Any]) -> None:
    """Issue 34: the first screen names the audited data set and, per defender, the claim its verdict is about;
    a defender without a claim says what its PASS means instead of standing next to an unexplained ε̂."""
    html = built["html"]
    first = html[: html.index('id="dp-claims-against-audited-lower-bounds"')]
    assert "Audited: data set digits" in first
    assert "no DP claim: PASS means the LTU privacy and utility floors hold" in first
    assert "black-box tested against: subsampled Gaussian (PLD)" in first
    md = built["md"]
    assert "| Defender | Gate | Claim | Reasons |" in md
