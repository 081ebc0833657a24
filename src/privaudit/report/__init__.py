"""Audit report and release gate, over the typed metrics files (:mod:`privaudit.metrics_files`).

- :mod:`privaudit.report.gate`: :func:`evaluate_gate` (``metrics/gate.json``); the theory check
  it shares with the report is in :mod:`privaudit.audits.theory`.
- :mod:`privaudit.report.plots`: matplotlib figures as PNG bytes and
  :func:`write_plot_files` (PNGs + tidy CSVs for ``dvc plots``).
- :mod:`privaudit.report.render`: :func:`build_report` writes the self-contained
  ``audit.html`` and ``audit.md``.
- :mod:`privaudit.report.inputs`: :class:`ReportInputs`.
- :mod:`privaudit.report.stage`: :func:`run_report`, everything the report stage does.

Typical use::

    metrics = read_metrics("metrics/ltu.json", "metrics/audit.json", "metrics/bounds.json")
    gate = evaluate_gate(metrics, params.gate)
    build_report(ReportInputs(metrics, gate, manifest, ...), Path("reports"))
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: ``privaudit verdict`` imports the gate without paying for matplotlib/pandas.
_EXPORTS: dict[str, str] = {
    "MISSING": "privaudit.report.render",
    "GateParams": "privaudit.report.gate",
    "ReportInputs": "privaudit.report.inputs",
    "build_report": "privaudit.report.render",
    "evaluate_gate": "privaudit.report.gate",
    "render_plots": "privaudit.report.plots",
    "run_report": "privaudit.report.stage",
    "write_plot_files": "privaudit.report.plots",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name from its submodule on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'privaudit.report' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """Exported names, for completion."""
    return sorted([*globals(), *_EXPORTS])
