"""Audit report and release gate.

- :mod:`privaudit.report.gate`: :class:`GateParams` and :func:`evaluate_gate`
  (``metrics/gate.json``).
- :mod:`privaudit.report.plots`: matplotlib figures as PNG bytes and
  :func:`write_plot_files` (PNGs + tidy CSVs for ``dvc plots``).
- :mod:`privaudit.report.render`: :func:`build_report` writes the self-contained
  ``audit.html`` and ``audit.md``.
- :mod:`privaudit.report.inputs`: :class:`ReportInputs` and :func:`read_metrics_json`.

Typical use in the report stage::

    gate = evaluate_gate(ltu, audit, bounds, GateParams.model_validate(params["gate"]))
    build_report(ReportInputs(ltu, audit, bounds, gate, manifest, ...), Path("reports"))
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
    "read_metrics_json": "privaudit.report.inputs",
    "render_plots": "privaudit.report.plots",
    "validate_gate_result": "privaudit.report.gate",
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
