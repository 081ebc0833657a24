"""The audit report, over the typed metrics files (:mod:`privaudit.verdict.metrics_files`) and the gate's
verdict (:func:`privaudit.verdict.gate.evaluate_gate`, ``metrics/gate.json``): this package only renders.

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

# Lazy exports: importing the package pays for no matplotlib/pandas until a renderer is used.
_EXPORTS: dict[str, str] = {
    "MISSING": "privaudit.report.render",
    "ReportInputs": "privaudit.report.inputs",
    "build_report": "privaudit.report.render",
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
