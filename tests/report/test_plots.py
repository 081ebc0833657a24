"""Plot helpers and the files written for ``dvc plots``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from privaudit.verdict.metrics_files import AuditMetrics, parse_entries
from privaudit.report import ReportInputs
from tests.report import synthetic
from privaudit.report.plots import (
    most_exposed,
    privacy_score_figure,
    privacy_utility_figure,
    privacy_utility_plot,
    privacy_utility_table,
    render_plots,
    roc_figure,
    safe_name,
    tpr_at,
    tradeoff_figure,
    write_plot_files,
)
from privaudit.report.tables import tradeoff_claims

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_write_plot_files_tidy_csvs(tmp_path: Path, inputs: ReportInputs) -> None:
    written = write_plot_files(inputs, tmp_path / "plots")
    names = {p.relative_to(tmp_path / "plots").as_posix() for p in written}
    assert names == {
        "privacy_utility.png",
        "epsilon_vs_trials.png",
        "tradeoff.png",
        "privacy_scores.png",
        "roc.png",
        "privacy_utility.csv",
        "most_exposed.csv",
        "epsilon_vs_trials/logreg.csv",
        "epsilon_vs_trials/dp_sgd.csv",
        "roc/logreg__gap.csv",
        "roc/logreg__model_diff.csv",
        "roc/dp_sgd__gap.csv",
        "roc/dp_sgd__model_diff.csv",
        "privacy_scores/logreg.csv",
        "privacy_scores/dp_sgd.csv",
    }
    pu = pd.read_csv(tmp_path / "plots" / "privacy_utility.csv")
    assert len(pu) == 4 and pu["strongest"].sum() == 2
    row = pu[(pu.defender == "dp_sgd") & (pu.attacker == "model_diff")].iloc[0]
    assert row.privacy == pytest.approx(0.9) and row.utility == pytest.approx((8.6 - 1) / 9)
    eps = pd.read_csv(tmp_path / "plots" / "epsilon_vs_trials" / "dp_sgd.csv")
    assert list(eps.columns) == ["trials", "eps_k1", "eps_ksqrt", "claimed_epsilon"]
    assert eps["trials"].is_monotonic_increasing and (eps["claimed_epsilon"] == 1.0).all()
    assert (
        pd.read_csv(tmp_path / "plots" / "epsilon_vs_trials" / "logreg.csv")["claimed_epsilon"]
        .isna()
        .all()
    )
    roc = pd.read_csv(tmp_path / "plots" / "roc" / "logreg__gap.csv")
    assert list(roc.columns) == ["fpr", "tpr"] and len(roc) == 4001
    hist = pd.read_csv(tmp_path / "plots" / "privacy_scores" / "logreg.csv")
    assert list(hist.columns) == [
        "bin_low",
        "bin_high",
        "bin_center",
        "count_defender",
        "count_reserved",
    ]
    assert hist["count_defender"].sum() == 200 and hist["count_reserved"].sum() == 200
    exposed = pd.read_csv(tmp_path / "plots" / "most_exposed.csv")
    assert list(exposed.columns) == ["defender", "rank", "id", "role", "score"]
    assert len(exposed) == 20


def test_most_exposed_lowest_scores_ids_only(inputs: ReportInputs) -> None:
    assert inputs.privacy_scores is not None
    frame = inputs.privacy_scores["logreg"].assign(secret_feature=1.0)
    top = most_exposed({"logreg": frame}, 5)["logreg"]
    assert list(top.columns) == ["rank", "id", "role", "score"]
    expected = frame.sort_values("score").head(5)
    assert list(top["id"]) == list(expected["id"]) and list(top["rank"]) == [1, 2, 3, 4, 5]
    assert most_exposed({"logreg": frame}, 0)["logreg"].empty  # report.most_exposed = 0: none listed
    with pytest.raises(ValueError, match="most_exposed must be an integer >= 0"):
        most_exposed({"logreg": frame}, -1)


def test_pngs_are_deterministic(inputs: ReportInputs) -> None:
    first = privacy_utility_figure(inputs.metrics.ltu)
    assert first is not None and first.startswith(PNG_MAGIC)
    assert privacy_utility_figure(inputs.metrics.ltu) == first


def test_user_strings_do_not_break_matplotlib(inputs: ReportInputs) -> None:
    """A ``$`` pair in a name would start mathtext (and fail to parse) if not escaped."""
    assert inputs.privacy_scores is not None and inputs.roc is not None
    name = "cost $x^{ and $"
    assert privacy_score_figure({name: inputs.privacy_scores["logreg"]}) is not None
    assert roc_figure({name: {name: inputs.roc["logreg"]["gap"]}}) is not None


def test_empty_inputs_give_no_figure() -> None:
    assert privacy_utility_figure({}) is None
    assert roc_figure(None) is None and roc_figure({"a": {}}) is None
    assert privacy_score_figure({}) is None


def test_tpr_at_interpolates() -> None:
    assert tpr_at([0.0, 0.01, 1.0], [0.0, 0.5, 1.0], 0.005) == pytest.approx(0.25)
    assert tpr_at([1.0, 0.0], [1.0, 0.0], 0.5) == pytest.approx(0.5)  # unsorted input
    with pytest.raises(ValueError, match="fpr is empty"):
        tpr_at([], [], 0.1)


@pytest.mark.parametrize(
    ("name", "expected"), [("dp_sgd", "dp_sgd"), ("a/b c", "a_b_c"), ("../..", "unnamed")]
)
def test_safe_name(name: str, expected: str) -> None:
    assert safe_name(name) == expected


def test_colliding_file_names_stay_distinct(tmp_path: Path, inputs: ReportInputs) -> None:
    assert inputs.privacy_scores is not None
    frame = inputs.privacy_scores["logreg"]
    sub = ReportInputs(AuditMetrics(), privacy_scores={"a b": frame, "a/b": frame})
    written = write_plot_files(sub, tmp_path)
    hist = sorted(p.name for p in written if p.parent.name == "privacy_scores")
    assert hist == ["a_b-2.csv", "a_b.csv"]


def test_privacy_utility_table_attackers_only() -> None:
    ltu: dict[str, Any] = {
        "d": {"utility": 0.8, "attackers": {"x": {"privacy": 0.3}, "y": {"privacy": 0.1}}}
    }
    table = privacy_utility_table(parse_entries("ltu", ltu))
    assert list(table["attacker"]) == ["x", "y"]
    assert list(table["strongest"]) == [False, True]  # lowest privacy when no top-level attacker
    assert (table["utility"] == 0.8).all()


def test_many_defenders_get_a_legend_beside_the_axes_not_over_them() -> None:
    """20 defenders × 2 attackers: one legend entry per defender and per attacker, outside the plot."""
    ltu = {f"defender_{i:02d}": synthetic.defender_ltu(0.55 + i / 100, 0.6 + i / 100, 0.9) for i in range(20)}
    fig = privacy_utility_plot(parse_entries("ltu", ltu))
    assert fig is not None
    colours, shapes = fig.legends  # colour = defender, shape = attacker: two titled legends (issue 34)
    assert colours.get_title().get_text() == "defender (colour)" and shapes.get_title().get_text() == "attacker (shape)"
    assert [t.get_text() for t in colours.get_texts()] == [f"defender_{i:02d}" for i in range(20)]
    assert sorted(t.get_text() for t in shapes.get_texts()) == ["gap", "model_diff"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    axes_box = fig.axes[0].get_window_extent(renderer)
    for legend in (colours, shapes):
        box = legend.get_window_extent(renderer)
        assert box.x0 >= axes_box.x1 and box.y0 >= 0 and box.y1 <= fig.bbox.height
    assert not colours.get_window_extent(renderer).overlaps(shapes.get_window_extent(renderer))


def test_privacy_utility_axes_zoom_on_the_points() -> None:
    """Issue 34: every marker sat in one corner of 0-1 axes; the axes now span the points and their bars."""
    ltu = {"a": synthetic.defender_ltu(0.95, 0.97, 0.9), "b": synthetic.defender_ltu(0.93, 0.96, 0.95)}
    fig = privacy_utility_plot(parse_entries("ltu", ltu))
    assert fig is not None
    lo, hi = fig.axes[0].get_xlim()
    assert lo > 0.5 and hi - lo < 0.6


# --------------------------------------------------------------------------- trade-off figure


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.size


def test_tradeoff_figure_one_row_per_claiming_defender() -> None:
    m = synthetic.with_blackbox(synthetic.metrics())  # dp_sgd: subsampled Gaussian; dp_bare: (ε, δ) only
    m["audit"]["logreg"]["blackbox"] = synthetic.bare_blackbox(warning=None)  # a block but no claim
    audit = synthetic.typed(m).audit
    assert list(tradeoff_claims(audit)) == ["dp_sgd", "dp_bare"]
    claim, _ = tradeoff_claims(audit)["dp_sgd"]
    assert claim.mechanism is not None and claim.family().name == "subsampled_gaussian"
    two = tradeoff_figure(audit)
    assert two is not None and two.startswith(PNG_MAGIC)
    del m["audit"]["dp_bare"]
    one = tradeoff_figure(synthetic.typed(m).audit)
    assert one is not None
    (w2, h2), (w1, h1) = png_size(two), png_size(one)
    assert w2 == w1 > 1000 and h2 == pytest.approx(2 * h1, rel=0.02)


def test_tradeoff_figure_absent_without_a_comparable_claim_and_a_blackbox_block() -> None:
    assert tradeoff_figure(synthetic.typed(synthetic.metrics()).audit) is None  # claims, no black-box block
    m = synthetic.metrics()
    m["audit"]["logreg"]["blackbox"] = synthetic.bare_blackbox(warning=None)  # a black-box block, no claim
    m["audit"]["dp_sgd"].update(claimed_neighbourhood="replace_one", blackbox=synthetic.bare_blackbox(None))
    audit = synthetic.typed(m).audit
    assert tradeoff_claims(audit) == {}  # replace-one says nothing about add/remove
    assert tradeoff_figure(audit) is None
    assert render_plots(ReportInputs(synthetic.typed(m)))["tradeoff"] is None


def test_tradeoff_figure_survives_a_curve_that_cannot_be_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Any, theta: float, alpha: Any) -> Any:
        raise ImportError("no dp_accounting")

    monkeypatch.setattr("privaudit.stats.tradeoff.SubsampledGaussianFamily.curve", broken)
    m = synthetic.with_blackbox(synthetic.metrics(), bare=False)
    assert tradeoff_figure(synthetic.typed(m).audit) is not None


def test_tradeoff_figure_of_an_older_blackbox_block() -> None:
    m = synthetic.with_blackbox(synthetic.metrics(), bare=False)
    for key in ("curve", "curve_description", "refutes_claimed_curve", "claim_tau", "claim_fpr_upper",
                "claim_fnr_upper", "gdp_epsilon", "gdp_warning", "tuning_in"):
        del m["audit"]["dp_sgd"]["blackbox"][key]
    assert tradeoff_figure(synthetic.typed(m).audit) is not None  # the claim's curve, no points


def test_most_exposed_ids_do_not_print_over_each_other() -> None:
    """Issue 34: flagged samples at nearly the same p printed their ids on top of each other."""
    import numpy as np
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from privaudit.report.figures import _risk_panel
    from privaudit.report.tables import most_exposed

    rng = np.random.default_rng(1)
    n = 60
    frame = pd.DataFrame({
        "id": [f"x{i}" for i in range(n)], "role": ["defender"] * 30 + ["reserved"] * 30, "score": rng.random(n),
        "risk": rng.normal(size=n), "risk_low": -1.0, "risk_high": 1.0, "z": 0.0, "p_value": rng.random(n),
        "q_value": 1.0, "flagged": False, "control_hit": False, "risk_level": 0.05, "risk_correction": "bh",
        "risk_interval": 0.9,
    })
    close = [3, 7, 9, 11]  # four flagged samples within a factor 1.1 of each other in p and risk
    frame.loc[close, "flagged"] = True
    frame.loc[close, ["p_value", "risk"]] = [[1e-6, 10.0], [1.05e-6, 10.3], [1.1e-6, 10.1], [0.95e-6, 9.9]]
    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _risk_panel(ax, "d", frame, most_exposed({"d": frame}, 5)["d"])
    ys = sorted(t.xyann[1] for t in ax.texts)
    assert len(ys) == 4
    span = ax.get_ylim()[1] - ax.get_ylim()[0]
    assert min(b - a for a, b in zip(ys, ys[1:])) >= 0.06 * span


# --------------------------------------------------------------------------- trade-off figure legibility

#: the report's content width at a 1400 px window (body max-width 1180 px less 2 × 2rem padding)
CONTENT_PX = 1116


def _tradeoff_axes() -> tuple[Any, Any, Any]:
    from privaudit.report.figures import tradeoff_plot

    m = synthetic.with_blackbox(synthetic.metrics(), bare=False)  # dp_sgd: certified point at FPR 0.28
    fig = tradeoff_plot(synthetic.typed(m).audit)
    assert fig is not None
    fig.canvas.draw()
    lin, log = fig.axes
    return fig, lin, log


def test_tradeoff_legend_is_at_least_10px_in_the_report() -> None:
    from privaudit.report.figures import tradeoff_figure

    fig, _, _ = _tradeoff_axes()
    legends = [leg for sub in fig.subfigs for leg in sub.legends]
    assert legends
    width = png_size(tradeoff_figure(synthetic.typed(synthetic.with_blackbox(synthetic.metrics(), bare=False)).audit)
                     or b"")[0]
    shown = min(1.0, CONTENT_PX / width)  # the <img> is scaled to the content width when wider
    for leg in legends:
        for text in [*leg.get_texts(), leg.get_title()]:
            px = text.get_fontsize() * fig.dpi / 72 * shown
            assert px >= 10, (text.get_text(), px)


def test_tradeoff_eps_hat_is_in_the_panel() -> None:
    _, lin, _ = _tradeoff_axes()
    boxes = [t for t in lin.texts if t.get_gid() == "eps_hat"]
    assert len(boxes) == 1 and "black-box ε̂ = 0.189" in boxes[0].get_text() and "claim ε = 1" in boxes[0].get_text()
    assert boxes[0].get_fontsize() * 100 / 72 >= 10


def test_tradeoff_claim_and_ceiling_differ_in_colour_and_line_style() -> None:
    from matplotlib.colors import to_rgb

    _, lin, log = _tradeoff_axes()
    for ax in (lin, log):
        (claim,) = [ln for ln in ax.lines if ln.get_gid() == "claim"]
        (ceiling,) = [ln for ln in ax.lines if ln.get_gid() == "ceiling"]
        assert to_rgb(claim.get_color()) != to_rgb(ceiling.get_color())
        assert claim.get_linestyle() != ceiling.get_linestyle()
        assert claim.get_linewidth() >= 2 * ceiling.get_linewidth()  # the dashed ceiling shows on the claim band


def test_tradeoff_log_panel_is_not_empty_for_a_point_at_fpr_0_3() -> None:
    import numpy as np

    _, _, log = _tradeoff_axes()
    (x0, x1), (y0, y1) = log.get_xlim(), log.get_ylim()
    point = [ln for ln in log.lines if ln.get_marker() == "X"][0]
    (px,), (py,) = point.get_xdata(), point.get_ydata()
    # the point is inside the panel, not in its corner: at least a decade from the left edge (log scale)
    assert x0 < px < x1 and y0 < py < y1 and np.log10(px / x0) >= 1.0
    (claim,) = [ln for ln in log.lines if ln.get_gid() == "claim"]
    xs, ys = np.asarray(claim.get_xdata()), np.asarray(claim.get_ydata())
    inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
    assert np.log10(xs[inside].max() / xs[inside].min()) >= 1.0  # the claim's curve crosses the panel
