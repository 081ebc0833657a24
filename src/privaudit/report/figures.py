"""Report figures (matplotlib, Agg canvas, no pyplot state) as PNG bytes.

Figures (one PNG each; one panel per defender where it applies):

- ``privacy_utility.png``: LTU privacy (Eq. 1) vs utility (Eq. 2) with error bars, one
  point per defender and attacker.
- ``epsilon_vs_trials.png``: LiDP ε̂ lower bound vs number of trials, K = 1 vs K = √n
  canaries per trial, with the claimed ε as a dashed line.
- ``privacy_scores.png``: per-sample privacy risk per defender (scores files with the
  reference-model risk of :mod:`privaudit.attacks.sample_risk`): risk (LiRA log-likelihood
  ratio) against significance (−log10 p), Reserved samples as the negative control, the p-value
  cutoff of the multiplicity correction as a dashed line, and the flagged Defender samples with
  their bootstrap intervals and ids; older scores files without risk: histograms of the
  individual privacy scores with the most exposed ids (ids only, never raw data).
- ``roc.png``: ROC curves per defender and attacker on log-log axes, with TPR at 0.1 % and
  1 % FPR.
- ``tradeoff.png``: the black-box audit against the claim's trade-off curve, one row per defender
  with a black-box block and a claim comparable with it (add/remove): FPR α (x) against FNR β (y)
  on [0, 1]², the claim's curve (its declared mechanism's, else the (ε, δ) polygon) and the region
  it excludes, the certified point (``claim_fpr_upper``, ``claim_fnr_upper``) with its confidence
  box, the GDP view's threshold (observed rates to upper bounds, a diagnostic) and, for DP-SGD
  recipes, the last-iterate ceiling's Gaussian curve G_μ; beside it the low-FPR corner on log-log
  axes (1 − FNR against FPR), ranged on the plotted points; ε̂ against the claim in a box in the linear
  panel; the legend below both panels, at least 12 px in the report (the figure is shown unscaled).

PNG bytes are deterministic for the same inputs and matplotlib version (no timestamp or
software metadata), so ``dvc`` does not see a change where there is none.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from privaudit.claims.claim import PrivacyClaim
from privaudit.verdict.metrics_files import AuditEntry, BlackboxBlock, LtuEntry
from privaudit.report.inputs import ReportInputs
from privaudit.report.tables import (
    block_value,
    curve_stat,
    epsilon_series,
    finite,
    gdp_view_box,
    has_risk,
    most_exposed,
    privacy_utility_table,
    risk_summary,
    score_bins,
    tradeoff_claims,
)

__all__ = [
    "PLOT_NAMES",
    "epsilon_trials_figure",
    "placeholder_figure",
    "privacy_score_figure",
    "privacy_utility_figure",
    "render_plots",
    "roc_figure",
    "tradeoff_figure",
    "tradeoff_plot",
]


#: The PNG figures, in report order: name -> title.
PLOT_NAMES: dict[str, str] = {
    "privacy_utility": "LTU privacy vs utility",
    "epsilon_vs_trials": "Audited ε lower bound vs number of trials (LiDP)",
    "tradeoff": "Black-box audit against the claimed trade-off curve",
    "privacy_scores": "Per-sample privacy risk",
    "roc": "ROC curves of the membership attacks",
}


_DPI = 100


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _text(value: Any) -> str:
    """A user string safe for matplotlib (a literal ``$`` must not start mathtext)."""
    return str(value).replace("$", r"\$")


def _new_figure(
    n_panels: int = 1, panel_size: tuple[float, float] = (4.6, 3.6)
) -> tuple[Figure, list[Axes]]:
    """A figure with ``n_panels`` axes on a grid of at most two columns."""
    ncols = 1 if n_panels <= 1 else 2
    nrows = max(1, math.ceil(n_panels / ncols))
    fig = Figure(
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows), dpi=_DPI, layout="constrained"
    )
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n_panels)]
    return fig, axes


def _png(fig: Figure) -> bytes:
    """Render a figure to PNG bytes without metadata (deterministic)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def placeholder_figure(title: str, message: str = "not computed in this audit") -> bytes:
    """A small PNG saying that a plot's data is absent (keeps ``dvc plots`` paths stable)."""
    fig, (ax,) = _new_figure(1, (6.0, 1.6))
    ax.set_axis_off()
    ax.text(0.5, 0.6, _text(title), ha="center", va="center", fontsize=12, weight="bold")
    ax.text(0.5, 0.25, _text(message), ha="center", va="center", fontsize=11, color="#555555")
    return _png(fig)


def privacy_utility_figure(ltu: Mapping[str, LtuEntry]) -> bytes | None:
    """Privacy vs utility scatter with error bars as PNG; ``None`` if there is no LTU result."""
    fig = privacy_utility_plot(ltu)
    return None if fig is None else _png(fig)


def privacy_utility_plot(ltu: Mapping[str, LtuEntry]) -> Figure | None:
    """The matplotlib figure of :func:`privacy_utility_figure` (colour = defender, marker = attacker)."""
    table = privacy_utility_table(ltu).dropna(subset=["privacy", "utility"])
    if table.empty:
        return None
    fig, (ax,) = _new_figure(1, (7.5, 5.0))
    defenders = list(dict.fromkeys(table["defender"]))
    attackers = list(dict.fromkeys(table["attacker"]))
    for _, row in table.iterrows():
        color = _COLORS[defenders.index(row["defender"]) % len(_COLORS)]
        marker = _MARKERS[attackers.index(row["attacker"]) % len(_MARKERS)]
        ax.errorbar(
            row["utility"],
            row["privacy"],
            xerr=row["utility_stderr"] if row["utility_stderr"] is not None else None,
            yerr=row["privacy_stderr"] if row["privacy_stderr"] is not None else None,
            fmt=marker,
            color=color,
            markersize=8,
            capsize=4,
        )
    # the axes span the points and their error bars (with a margin), not all of [0, 1]: the defenders of one
    # audit usually sit in one corner, where full axes squeezed them into one blob (issue 34)
    def span(value: str, err: str) -> tuple[float, float]:
        e = table[err].fillna(0.0).astype(float) if err in table else 0.0
        lo, hi = float((table[value] - e).min()), float((table[value] + e).max())
        pad = max(0.02, 0.08 * (hi - lo))
        return max(-0.05, lo - pad), min(1.05, hi + pad)

    ax.set_xlim(*span("utility", "utility_stderr"))
    ax.set_ylim(*span("privacy", "privacy_stderr"))
    ax.set_xlabel("utility (LTU Eq. 2)  →  more useful")
    ax.set_ylabel("privacy (LTU Eq. 1)  →  more private")
    ax.set_title("Privacy vs utility (± 1 standard error)")
    ax.grid(True, alpha=0.3)
    # colour = defender, marker = attacker: one legend entry each (not one per pair), outside the
    # axes, in columns of at most 20, so that many defenders never cover the points
    colours = [Line2D([], [], color=_COLORS[i % len(_COLORS)], marker="o", linestyle="", label=_text(d))
               for i, d in enumerate(defenders)]
    shapes = [Line2D([], [], color="#444444", marker=_MARKERS[i % len(_MARKERS)], linestyle="", label=_text(a))
              for i, a in enumerate(attackers)]
    # two legends, each titled: colours name defenders, shapes name attackers
    fig.legend(handles=colours, title="defender (colour)", fontsize=8, title_fontsize=8, loc="outside right upper",
               ncols=math.ceil(len(colours) / 20))
    fig.legend(handles=shapes, title="attacker (shape)", fontsize=8, title_fontsize=8, loc="outside right lower",
               ncols=math.ceil(len(shapes) / 20))
    return fig


def epsilon_trials_figure(
    epsilon_vs_trials: Mapping[str, pd.DataFrame] | None, audit: Mapping[str, AuditEntry]
) -> bytes | None:
    """ε̂ (K = 1 and K = √n) vs trials per defender with the claimed ε; ``None`` if no data."""
    names = list(dict.fromkeys([*(epsilon_vs_trials or {}), *audit]))
    series = {d: s for d in names if (s := epsilon_series(d, epsilon_vs_trials, audit)) is not None}
    if not series:
        return None
    fig, axes = _new_figure(len(series))
    for ax, (defender, frame) in zip(axes, series.items(), strict=True):
        style = "-o" if len(frame) > 1 else "o"
        ax.plot(frame["trials"], frame["eps_k1"], style, color=_COLORS[0], label="K = 1")
        ax.plot(frame["trials"], frame["eps_ksqrt"], style, color=_COLORS[1], label="K = √n")
        entry = audit.get(defender)
        claimed = finite(entry.claimed_epsilon) if entry is not None else None
        if claimed is not None:
            ax.axhline(claimed, linestyle="--", color="black", label=f"claimed ε = {claimed:g}")
        trials = frame["trials"].dropna()
        if len(trials) and trials.min() > 0 and trials.max() / trials.min() >= 10:
            ax.set_xscale("log")
        # the curve runs over the certification trials only: the table's n also counts the trials that chose τ
        lidp = entry.lidp if entry is not None else None
        tuning = finite(lidp.tuning_trials) if lidp is not None else None
        total = finite(lidp.trials) if lidp is not None else None
        if tuning and total:
            ax.set_xlabel(f"certification trials (of n = {total:g}; the other {tuning:g} chose τ)")
        else:
            ax.set_xlabel("number of trials n")
        ax.set_ylabel(r"audited $\hat{\varepsilon}$ (lower bound)")
        ax.set_title(_text(defender))
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    return _png(fig)


def privacy_score_figure(
    privacy_scores: Mapping[str, pd.DataFrame] | None, top_k: int = 5
) -> bytes | None:
    """Per-defender panels: the per-sample risk (:func:`_risk_panel`) where the scores file has
    it, else histograms of individual privacy scores with the most exposed ids annotated."""
    if not privacy_scores:
        return None
    exposed = most_exposed(privacy_scores, top_k)
    fig, axes = _new_figure(len(privacy_scores))
    for ax, (defender, frame) in zip(axes, privacy_scores.items(), strict=True):
        if has_risk(frame):
            _risk_panel(ax, str(defender), frame, exposed[str(defender)])
        else:
            _score_histogram_panel(ax, str(defender), frame, exposed[str(defender)])
    return _png(fig)


def _p_cutoff(summary: Mapping[str, Any]) -> float | None:
    """The p-value cutoff of the correction: level · flagged / tested (Benjamini-Hochberg's
    step-up threshold; level / tested when nothing is flagged) or level / tested (Bonferroni)."""
    level, tested = finite(summary.get("level")), summary.get("tested") or 0
    if level is None or not tested:
        return None
    if summary.get("correction") == "bh":
        return level * max(int(summary.get("flagged") or 0), 1) / tested
    return level / tested


def _risk_panel(ax: Axes, defender: str, frame: pd.DataFrame, top: pd.DataFrame) -> None:
    """Risk (x, symlog) vs −log10 p (y): Reserved control grey, Defender blue, flagged red with
    bootstrap intervals, the correction's p cutoff dashed, the ``top`` flagged ids annotated."""
    summary = risk_summary(frame) or {}
    roles = frame["role"].astype(str)
    risk = pd.to_numeric(frame["risk"], errors="coerce")
    p = pd.to_numeric(frame["p_value"], errors="coerce").clip(lower=1e-300)
    y = -np.log10(p)
    flagged = (roles == "defender") & frame["flagged"].astype(bool)
    ok = risk.notna() & y.notna()
    res, dfd = ok & (roles == "reserved"), ok & (roles == "defender") & ~flagged
    control = summary.get("reserved_flagged")
    ax.scatter(risk[res], y[res], s=6, color="#999999", alpha=0.5,
               label=_text(f"Reserved (negative control): {control if control is not None else '?'} "
                           f"of {summary.get('reserved_tested')} over the cutoff"))
    ax.scatter(risk[dfd], y[dfd], s=6, color=_COLORS[0], alpha=0.5, label="Defender")
    fl = ok & flagged
    if fl.any():
        low = pd.to_numeric(frame.loc[fl, "risk_low"], errors="coerce")
        high = pd.to_numeric(frame.loc[fl, "risk_high"], errors="coerce")
        xerr = np.vstack([(risk[fl] - low).clip(lower=0).fillna(0), (high - risk[fl]).clip(lower=0).fillna(0)])
        ax.errorbar(risk[fl], y[fl], xerr=xerr, fmt="o", markersize=4, color=_COLORS[1], capsize=2,
                    linewidth=0.8, label=f"flagged Defender ({int(fl.sum())})")
    cutoff = _p_cutoff(summary)
    if cutoff is not None and cutoff > 0:
        name = summary.get("correction_name") or summary.get("correction")
        ax.axhline(-math.log10(cutoff), linestyle="--", color="black", linewidth=0.9,
                   label=_text(f"{name} {finite(summary.get('level')):g} cutoff, "
                               f"{summary.get('tested')} tested"))
    by_id = {str(i): k for k, i in enumerate(frame["id"].astype(str))}
    ytop = max(float(y[ok].max()) if ok.any() else 1.0, -math.log10(cutoff) if cutoff else 0.0)
    points: list[tuple[float, float, str]] = []
    for row in top.itertuples():
        k = by_id.get(str(row.id))
        if k is not None and ok.iloc[k]:
            points.append((float(y.iloc[k]), float(risk.iloc[k]), str(row.id)))
    # labels stacked downwards from the highest point, at least 7 % of the axis apart, each joined to its
    # point: ids of points that lie close together no longer print over each other (issue 34)
    gap, last = 0.07 * (1.5 * ytop + 0.5), math.inf
    for py, px, label in sorted(points, reverse=True):
        ly = min(py, last - gap)
        last = ly
        ax.annotate(_text(label), (px, py), xytext=(8, ly), textcoords=("offset points", "data"), fontsize=7,
                    va="center", arrowprops={"arrowstyle": "-", "color": "#888888", "linewidth": 0.6})
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axvline(0.0, color="gray", alpha=0.4, linewidth=0.8)
    ax.set_ylim(-0.05 * ytop, 1.5 * ytop + 0.5)  # head room: the legend sits above points and cutoff
    interval = finite(summary.get("interval"))
    band = f"\nbars: {100 * interval:g} % bootstrap interval over reference models" if interval else ""
    ax.set_xlabel(_text(f"risk: LiRA log-likelihood ratio IN vs OUT (symlog){band}"), fontsize=9)
    ax.set_ylabel("−log10 p (vs. models that never saw it)")
    ax.set_title(_text(defender))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def _score_histogram_panel(ax: Axes, defender: str, frame: pd.DataFrame, top: pd.DataFrame) -> None:
    """Histogram of individual privacy scores per role, the most exposed ids in the x label."""
    scores = pd.to_numeric(frame["score"], errors="coerce")
    valid = frame.assign(score=scores).dropna(subset=["score"])
    edges = score_bins(valid["score"])
    roles = sorted(valid["role"].astype(str).unique())
    data = [valid.loc[valid["role"].astype(str) == r, "score"].to_numpy() for r in roles]
    if data:
        for i, (role, values) in enumerate(zip(roles, data, strict=True)):
            color = _COLORS[i % len(_COLORS)]
            ax.hist(values, bins=edges.tolist(), color=color, alpha=0.45, label=_text(role))
            ax.hist(values, bins=edges.tolist(), color=color, histtype="step", linewidth=1.2)
        ax.legend(fontsize=8, loc="upper left")
    ids = [str(i) for i in top["id"]]
    lines = [", ".join(ids[k : k + 3]) for k in range(0, len(ids), 3)]
    # Below the axis (in the x label) so that it never hides bars or the legend.
    ax.set_xlabel(
        _text("\n".join(["individual privacy score (low = exposed)", "most exposed ids:", *lines]))
        if ids
        else "individual privacy score (no scores)",
        fontsize=9,
    )
    ax.set_ylabel("samples")
    ax.set_title(_text(defender))


def roc_figure(roc: Mapping[str, Mapping[str, Mapping[str, Any]]] | None) -> bytes | None:
    """ROC curves on log-log axes per defender; ``None`` if there is no curve."""
    panels = {d: a for d, a in (roc or {}).items() if a}
    if not panels:
        return None
    fig, axes = _new_figure(len(panels))
    for ax, (defender, per_attacker) in zip(axes, panels.items(), strict=True):
        smallest = 1.0
        for i, (attacker, curve) in enumerate(per_attacker.items()):
            fpr = np.asarray(curve["fpr"], dtype=float)
            tpr = np.asarray(curve["tpr"], dtype=float)
            keep = (fpr > 0) & (tpr > 0)
            if keep.any():
                smallest = min(smallest, float(fpr[keep].min()), float(tpr[keep].min()))
            auc = finite(curve.get("auc"))
            t01 = curve_stat(curve, "tpr_at_0_1pct", 1e-3)
            t1 = curve_stat(curve, "tpr_at_1pct", 1e-2)
            label = f"{attacker}: AUC {auc:.3f}" if auc is not None else f"{attacker}"
            label += f", TPR@0.1% {t01:.3g}, TPR@1% {t1:.3g}"
            ax.plot(fpr[keep], tpr[keep], color=_COLORS[i % len(_COLORS)], label=_text(label))
        low = max(1e-5, 10 ** math.floor(math.log10(smallest))) if smallest < 1 else 1e-3
        grid = np.logspace(math.log10(low), 0, 50)
        ax.plot(grid, grid, ":", color="gray", label="chance")
        for x in (1e-3, 1e-2):
            if x >= low:
                ax.axvline(x, color="gray", alpha=0.4, linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, 1)
        ax.set_ylim(low, 1.05)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title(_text(defender))
        ax.grid(True, which="major", alpha=0.3)
        # below the panel: inside it, the legend covered the low-FPR curves (issue 34)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=1, frameon=False)
    return _png(fig)


#: FPR grid of the trade-off figure: log-spaced for the low-FPR corner, linear for [0, 1]
_ALPHA = np.unique(np.concatenate([np.logspace(-7, 0, 421), np.linspace(0.0, 1.0, 401)]))

#: colours of the trade-off figure: claim curve, excluded region / refuting point, ceiling, GDP view
_CLAIM, _REFUTED, _CEILING, _GDP = "#1f77b4", "#d62728", "#a04000", "#9467bd"
#: the claim's curve is a wide translucent band, so a curve drawn on it (the ceiling, dashed) stays visible
_CLAIM_WIDTH = 6.0
#: legend and annotation size in points: at _DPI 100 a point is 100/72 px, and the figure is at most
#: TRADEOFF_WIDTH_IN wide, so the report (content 1116 px at a 1400 px window) shows it unscaled: >= 12 px
LEGEND_PT = 9.0
TRADEOFF_WIDTH_IN = 11.0

#: the log-log panel's lower limit on both axes (lower where a plotted point needs it, down to 1e-6)
_LOG_LOW = 1e-4


def _wrap(text: str, width: int = 46) -> str:
    """A legend label wrapped to ``width`` characters (``$`` made literal)."""
    return "\n".join(textwrap.wrap(_text(text), width, break_on_hyphens=False)) or _text(text)


def _claim_curve(claim: PrivacyClaim) -> tuple[np.ndarray | None, str]:
    """The claim's own trade-off curve on :data:`_ALPHA` and its description; ``(None, why)`` when it
    cannot be computed (the figure says so instead of failing the report)."""
    try:
        family = claim.family()
        curve = np.clip(np.asarray(family.curve(family.theta_claim, _ALPHA), dtype=float), 0.0, 1.0)
        return curve, family.describe()
    except Exception as exc:  # noqa: BLE001 - an accountant error must not fail the whole report
        return None, f"claim curve not computed: {exc}"


def _tradeoff_title(name: str, claim: PrivacyClaim, block: BlackboxBlock) -> str:
    """The legend title of one defender: claim, gated ε̂ and the claim test's verdict."""
    lines = [f"{name}", f"claim (add/remove): ε = {claim.epsilon:.4g}, δ = {claim.delta:.3g}"]
    eps = block_value(block, "eps_lower_bound")
    if eps is not None and block.curve is None:  # an older block: its ε̂ was the GDP view's
        lines.append(f"black-box ε̂ = {eps:.3g} (GDP view: audit.json predates claim curves)")
    elif eps is not None:
        lines.append(f"gated black-box ε̂ = {eps:.3g}" + (f" at level {block.level:.3g}" if block.level else ""))
    if block.refutes_claimed_curve is not None:
        lines.append("the certified point REFUTES the claimed curve" if block.refutes_claimed_curve
                     else "the certified point lies on or above the claimed curve")
    return "\n".join(_text(line) for line in lines)


def _tradeoff_row(axes: tuple[Axes, Axes, Any], name: str, claim: PrivacyClaim, block: BlackboxBlock) -> None:
    """One defender: the linear panel with ε̂ in a box, the low-FPR log-log panel and, below both, the legend
    (on ``leg``, the row's subfigure)."""
    lin, log, leg = axes
    curve, description = _claim_curve(claim)
    if curve is not None:
        label = (f"claimed (ε, δ) polygon, ε = {claim.epsilon:.4g}, δ = {claim.delta:.3g} (no mechanism declared)"
                 if claim.mechanism is None else f"claimed curve: {description}")
        lin.fill_between(_ALPHA, 0.0, curve, color=_REFUTED, alpha=0.07, linewidth=0,
                         label="excluded by the claim (a certified point here refutes it)")
        lin.plot(_ALPHA, curve, color=_CLAIM, linewidth=_CLAIM_WIDTH, alpha=0.55, solid_capstyle="butt",
                 label=_wrap(label), gid="claim")
        log.fill_between(_ALPHA, 1.0 - curve, 1.0, color=_REFUTED, alpha=0.07, linewidth=0)
        log.plot(_ALPHA, 1.0 - curve, color=_CLAIM, linewidth=_CLAIM_WIDTH, alpha=0.55, gid="claim")
    else:
        lin.text(0.5, 0.5, _wrap(description, 40), ha="center", va="center", fontsize=8, color="#555555",
                 transform=lin.transAxes)
    lin.plot([0.0, 1.0], [1.0, 0.0], ":", color="gray", linewidth=1.0, label="random guessing (FPR + FNR = 1)")
    log.plot(_ALPHA, _ALPHA, ":", color="gray", linewidth=1.0)

    ceiling = block.ceiling
    mu = finite(ceiling.mu) if ceiling is not None else None
    if mu is not None and mu > 0:
        from privaudit.stats.tradeoff import GaussianFamily

        g = np.asarray(GaussianFamily(mu).curve(mu, _ALPHA), dtype=float)
        same = curve is not None and float(np.max(np.abs(g - curve))) < 0.01
        lin.plot(_ALPHA, g, linestyle=(0, (4, 2.5)), color=_CEILING, linewidth=1.8, gid="ceiling",
                 label=_wrap(f"last-iterate ceiling (Gaussian approx.), G_μ with μ = {mu:.3g}: at most what a "
                             "final-model audit can reach" + ("; here it runs along the claimed curve (within 0.01)"
                                                              if same else "")))
        log.plot(_ALPHA, 1.0 - g, linestyle=(0, (4, 2.5)), color=_CEILING, linewidth=1.8, gid="ceiling")

    xs: list[float] = []
    box = gdp_view_box(block)
    if box is not None:
        fpr, fnr, fpr_u, fnr_u = box
        lin.add_patch(Rectangle((fpr, fnr), fpr_u - fpr, fnr_u - fnr, fill=False, edgecolor=_GDP, linewidth=1.3))
        lin.plot([fpr], [fnr], "o", color=_GDP, markersize=5, clip_on=False,
                 label=_wrap("GDP view's threshold (diagnostic): observed rates, box up to their upper bounds"))
        xs += [fpr_u] + ([fpr] if fpr > 0 else [])
    a, b = block_value(block, "claim_fpr_upper"), block_value(block, "claim_fnr_upper")
    refutes = bool(block.refutes_claimed_curve)
    color = _REFUTED if refutes else "black"
    if a is not None and b is not None:
        level = f" w.p. ≥ {1 - block.level:.4g}" if block.level else ""
        lin.add_patch(Rectangle((0.0, 0.0), a, b, facecolor=color, alpha=0.06, edgecolor="none"))
        lin.add_patch(Rectangle((0.0, 0.0), a, b, fill=False, edgecolor=color, linestyle="--", linewidth=1.2))
        lin.plot([a], [b], "X", color=color, markersize=10, markeredgecolor="white", zorder=5, clip_on=False,
                 label=_wrap(f"certified point FPR ≤ {a:.3g}, FNR ≤ {b:.3g} (the true rates lie in the dashed "
                             f"box{level}): " + ("below the curve, refutes the claim" if refutes
                                                 else "not below the curve")))
        xs.append(a)
    low = _log_low(xs)
    if box is not None:
        fpr, fnr, fpr_u, fnr_u = box
        x0, y0, y1 = max(fpr, low), max(1.0 - fnr_u, low), max(1.0 - fnr, low)
        log.add_patch(Rectangle((x0, y0), max(fpr_u - x0, 0.0), y1 - y0, fill=False, edgecolor=_GDP, linewidth=1.3))
        log.plot([max(fpr, low)], [max(1.0 - fnr, low)], "o", color=_GDP, markersize=5, clip_on=False)
    if a is not None and b is not None:
        y0 = max(1.0 - b, low)
        log.add_patch(Rectangle((low, y0), max(a - low, 0.0), 1.0 - y0, facecolor=color, alpha=0.06,
                                edgecolor="none"))
        log.add_patch(Rectangle((low, y0), max(a - low, 0.0), 1.0 - y0, fill=False, edgecolor=color,
                                linestyle="--", linewidth=1.2))
        log.plot([a], [y0], "X", color=color, markersize=10, markeredgecolor="white", zorder=5, clip_on=False)

    lin.text(0.98, 0.98, _text(_eps_annotation(claim, block)), transform=lin.transAxes, ha="right", va="top",
             fontsize=LEGEND_PT + 1, gid="eps_hat",
             bbox={"boxstyle": "round,pad=0.35", "facecolor": "white", "edgecolor": color, "alpha": 0.95})
    lin.set_xlim(0.0, 1.0)
    lin.set_ylim(0.0, 1.0)
    lin.set_aspect("equal")
    lin.set_xlabel("FPR α (canary out, called in)")
    lin.set_ylabel("FNR β (canary in, called out)")
    lin.set_title(_text(f"{name}: trade-off"), fontsize=10)
    lin.grid(True, alpha=0.3)
    log.set_xscale("log")
    log.set_yscale("log")
    log.set_xlim(low, 1.0)
    log.set_ylim(low, 1.0)
    log.set_aspect("equal")
    log.set_xlabel("FPR α (log)")
    log.set_ylabel("1 − FNR (= TPR, log)")
    log.set_title("low-FPR corner (log-log; the claim excludes above its curve)", fontsize=9)
    log.grid(True, which="major", alpha=0.3)
    handles, labels = lin.get_legend_handles_labels()
    if curve is None:
        handles.insert(0, Patch(color="none"))
        labels.insert(0, _wrap(description))
    leg.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=LEGEND_PT,
               title=_tradeoff_title(name, claim, block).replace("\n", "  ·  ", 1), title_fontsize=LEGEND_PT + 0.5,
               frameon=False)


def _eps_annotation(claim: PrivacyClaim, block: BlackboxBlock) -> str:
    """The panel's ε̂ box: gated black-box ε̂ against the claimed ε, and whether the certified point refutes it."""
    eps = block_value(block, "eps_lower_bound")
    head = (f"black-box ε̂ = {eps:.3g}" if eps is not None else "black-box ε̂: not computed")
    lines = [f"{head}  (claim ε = {claim.epsilon:.3g})"]
    if block.refutes_claimed_curve is not None:
        lines.append("REFUTES the claimed curve" if block.refutes_claimed_curve else "not below the claimed curve")
    return "\n".join(lines)


def _log_low(xs: list[float]) -> float:
    """The lower limit of the log-log panel: a decade and a half below the smallest plotted FPR, at least 1e-6,
    at most 1e-2, so a point at FPR ≈ 0.3 sits inside the panel with the curves around it, not in its corner."""
    positive = [x for x in xs if x > 0]
    if not positive:
        return _LOG_LOW
    return float(min(1e-2, max(1e-6, min(positive) / 30.0)))


def tradeoff_plot(audit: Mapping[str, AuditEntry]) -> Figure | None:
    """The trade-off figure (see :func:`tradeoff_figure`) as a matplotlib figure, for tests that inspect it."""
    rows = tradeoff_claims(audit)
    if not rows:
        return None
    fig = Figure(figsize=(TRADEOFF_WIDTH_IN, 7.9 * len(rows)), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    subfigs = fig.subfigures(len(rows), 1, squeeze=False)[:, 0]
    for sub, (name, (claim, block)) in zip(subfigs, rows.items()):
        lin, log = sub.subplots(1, 2)
        _tradeoff_row((lin, log, sub), name, claim, block)
    return fig


def tradeoff_figure(audit: Mapping[str, AuditEntry]) -> bytes | None:
    """The black-box audit against the claim's trade-off curve (see the module doc), one row per defender
    with a black-box block and a claim comparable with it; ``None`` if there is none."""
    fig = tradeoff_plot(audit)
    return None if fig is None else _png(fig)


def render_plots(inputs: ReportInputs, workers: int = 1) -> dict[str, bytes | None]:
    """All report figures as PNG bytes (``None`` where the data is absent), keyed by
    :data:`PLOT_NAMES`; on up to ``workers`` processes forked from this one where that is safe
    (:func:`privaudit.repro.worker_pool.map_in_processes`, else one after the other here: the same bytes either
    way). Drawing them is most of the report stage (about 5 s of its 9 s on the default audit, 2 cores)."""
    from privaudit.repro.worker_pool import map_in_processes

    return dict(zip(_FIGURES, map_in_processes(_render_one, [(name,) for name in _FIGURES], workers,
                                               shared=(inputs,), fork_only=True)))


#: the figures of :func:`render_plots`, the slowest first (they are spread over the workers in this order)
_FIGURES = ("roc", "privacy_scores", "tradeoff", "epsilon_vs_trials", "privacy_utility")


def _render_one(inputs: ReportInputs, name: str) -> bytes | None:
    """One figure of :func:`render_plots` as PNG bytes."""
    if name == "privacy_utility":
        return privacy_utility_figure(inputs.metrics.ltu)
    if name == "epsilon_vs_trials":
        return epsilon_trials_figure(inputs.epsilon_vs_trials, inputs.metrics.audit)
    if name == "tradeoff":
        return tradeoff_figure(inputs.metrics.audit)
    if name == "privacy_scores":
        return privacy_score_figure(inputs.privacy_scores)
    if name == "roc":
        return roc_figure(inputs.roc)
    raise ValueError(f"no report figure named {name!r}; the figures are {list(_FIGURES)}")
