"""Fixtures for the data-source tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCATION_ENV = "PRIVAUDIT_LOCATION_TGZ"


@pytest.fixture
def location_tgz() -> Path:
    """The real Location benchmark: ``$PRIVAUDIT_LOCATION_TGZ`` or ``<repo>/../shared/data/location.tgz``."""
    path = Path(os.environ.get(LOCATION_ENV, REPO_ROOT.parent / "shared" / "data" / "location.tgz"))
    if not path.is_file():
        pytest.skip(f"Location benchmark not found at {path} (set {LOCATION_ENV} to its .tgz to run this test)")
    return path
