"""Plot files for the report and ``dvc plots``: PNG figures and tidy CSVs.

The figures themselves are drawn in :mod:`privaudit.report.figures` and the tables in
:mod:`privaudit.report.tables`; both are re-exported here. :func:`write_plot_files` writes
them under one folder (``reports/plots`` in the pipeline):

- ``privacy_utility.png``, ``epsilon_vs_trials.png``, ``tradeoff.png``, ``privacy_scores.png``,
  ``roc.png`` (image plots: ``dvc plots show/diff`` render them offline; a figure without data is a
  "not computed" placeholder);
- ``privacy_utility.csv``, ``most_exposed.csv``, ``epsilon_vs_trials/<defender>.csv``,
  ``roc/<defender>__<attacker>.csv``, ``privacy_scores/<defender>.csv`` (data-series plots).

The folder is replaced as a whole (:func:`privaudit.artifacts.atomic_dir`): a failure leaves the
previous plots as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.artifacts import atomic_dir
from privaudit.report.figures import (
    PLOT_NAMES,
    epsilon_trials_figure,
    placeholder_figure,
    privacy_score_figure,
    privacy_utility_figure,
    privacy_utility_plot,
    render_plots,
    roc_figure,
    tradeoff_figure,
)
from privaudit.report.inputs import ReportInputs
from privaudit.report.tables import (
    curve_stat,
    epsilon_series,
    finite,
    most_exposed,
    privacy_score_histogram,
    privacy_utility_table,
    safe_name,
    tpr_at,
    unique_names,
)

__all__ = [
    "PLOT_NAMES",
    "curve_stat",
    "epsilon_trials_figure",
    "most_exposed",
    "placeholder_figure",
    "privacy_score_figure",
    "privacy_score_histogram",
    "privacy_utility_figure",
    "privacy_utility_plot",
    "privacy_utility_table",
    "render_plots",
    "roc_figure",
    "safe_name",
    "tpr_at",
    "tradeoff_figure",
    "write_plot_files",
]


def _write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` (inside the temporary plots folder), creating its parent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _write_csv(path: Path, frame: pd.DataFrame) -> Path:
    """Write a DataFrame as CSV (no index, LF line ends)."""
    return _write_bytes(path, frame.to_csv(index=False, lineterminator="\n").encode("utf-8"))


def write_plot_files(
    inputs: ReportInputs,
    plots_dir: str | Path,
    pngs: Mapping[str, bytes | None] | None = None,
    most_exposed_k: int = 10,
) -> list[Path]:
    """Replace ``plots_dir`` with the PNG figures and tidy CSVs for ``dvc plots``.

    Files:
        ``<name>.png`` for each of :data:`PLOT_NAMES` (a "not computed" placeholder when the
        data is absent, so the paths declared in ``dvc.yaml`` always exist);
        ``privacy_utility.csv`` (defender, attacker, ..., utility, privacy);
        ``most_exposed.csv`` (defender, rank, id, role, score; with per-sample risk also risk,
        risk_low, risk_high, p_value, q_value: flagged Defender samples only);
        ``epsilon_vs_trials/<defender>.csv`` (trials, eps_k1, eps_ksqrt, claimed_epsilon);
        ``roc/<defender>__<attacker>.csv`` (fpr, tpr);
        ``privacy_scores/<defender>.csv`` (histogram: bin_low, bin_high, bin_center, count_<role>).

    Args:
        inputs: the report inputs.
        plots_dir: the folder (replaced as a whole; its parent is created if needed).
        pngs: already rendered figures from :func:`render_plots` (rendered here if omitted).
        most_exposed_k: rows per defender in ``most_exposed.csv``.

    Returns:
        The written paths (under ``plots_dir``), PNGs first.
    """
    plots_dir = Path(plots_dir)
    figures = dict(pngs) if pngs is not None else render_plots(inputs)
    with atomic_dir(plots_dir) as tmp:
        tmp.chmod(0o755)  # mkdtemp makes it private; reports are meant to be shared
        written = _write_plot_files(inputs, tmp, figures, most_exposed_k)
    return [plots_dir / path.relative_to(tmp) for path in written]


def _write_plot_files(
    inputs: ReportInputs, plots_dir: Path, figures: Mapping[str, bytes | None], most_exposed_k: int
) -> list[Path]:
    written: list[Path] = []
    for name, title in PLOT_NAMES.items():
        data = figures.get(name) or placeholder_figure(title)
        written.append(_write_bytes(plots_dir / f"{name}.png", data))

    written.append(_write_csv(plots_dir / "privacy_utility.csv", privacy_utility_table(inputs.metrics.ltu)))

    exposed = most_exposed(inputs.privacy_scores, most_exposed_k)
    risk_cols = ["risk", "risk_low", "risk_high", "p_value", "q_value"]
    frames = [
        t.assign(defender=d)[
            ["defender", "rank", "id", "role", "score", *[c for c in risk_cols if c in t.columns]]
        ]
        for d, t in exposed.items()
    ]
    exposed_table = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["defender", "rank", "id", "role", "score"])
    )
    written.append(_write_csv(plots_dir / "most_exposed.csv", exposed_table))

    audit = inputs.metrics.audit
    names = list(dict.fromkeys([*(inputs.epsilon_vs_trials or {}), *audit]))
    files = unique_names(names)
    for defender in names:
        series = epsilon_series(defender, inputs.epsilon_vs_trials, audit)
        if series is None:
            continue
        entry = audit.get(defender)
        claimed = finite(entry.claimed_epsilon) if entry is not None else None
        series = series.assign(claimed_epsilon=claimed)
        written.append(
            _write_csv(plots_dir / "epsilon_vs_trials" / f"{files[defender]}.csv", series)
        )

    curves = [(d, a, c) for d, per in (inputs.roc or {}).items() for a, c in per.items()]
    files = unique_names([f"{d}__{a}" for d, a, _ in curves])
    for defender, attacker, curve in curves:
        frame = pd.DataFrame(
            {"fpr": np.asarray(curve["fpr"], float), "tpr": np.asarray(curve["tpr"], float)}
        )
        written.append(
            _write_csv(plots_dir / "roc" / f"{files[f'{defender}__{attacker}']}.csv", frame)
        )

    files = unique_names(list(inputs.privacy_scores or {}))
    for defender, frame in (inputs.privacy_scores or {}).items():
        written.append(
            _write_csv(
                plots_dir / "privacy_scores" / f"{files[defender]}.csv",
                privacy_score_histogram(frame),
            )
        )
    return written
