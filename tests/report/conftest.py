"""Fixtures for the report tests: realistic synthetic metrics (see ``synthetic.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from privaudit.report import ReportInputs
from tests.report import synthetic


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker (tests that drive headless Chromium)."""
    config.addinivalue_line("markers", "browser: opens the HTML report in headless Chromium")


@pytest.fixture
def metrics() -> dict[str, dict[str, Any]]:
    """Fresh ``{"ltu", "audit", "bounds"}`` metrics, safe to mutate."""
    return synthetic.metrics()


@pytest.fixture
def inputs() -> ReportInputs:
    """Complete report inputs (all optional parts present)."""
    return synthetic.report_inputs()
