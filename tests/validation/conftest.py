"""Validation tests write their Data Docs into a temporary folder, never into the repository."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def docs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "validation-docs"
    monkeypatch.setenv("PRIVAUDIT_VALIDATION_DOCS", str(target))
    return target
