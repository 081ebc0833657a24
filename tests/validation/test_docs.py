"""Data Docs: every suite run lands in reports/validation (or $PRIVAUDIT_VALIDATION_DOCS), pass or fail."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privaudit.validation import ValidationFailed, validate_features
from privaudit.validation import docs


def test_pass_and_fail_are_recorded(docs_dir: Path) -> None:
    ids = np.array(["a", "b", "c"])
    validate_features(np.zeros((3, 2), np.float32), ids, ids, 2)
    with pytest.raises(ValidationFailed):
        validate_features(np.full((3, 2), np.nan, np.float32), ids, ids, 2)
    data = json.loads((docs_dir / "features.json").read_text())
    assert [r["success"] for r in data["runs"][-2:]] == [True, False]
    page = (docs_dir / "features.html").read_text()
    assert "FAILED" in page and "features are finite" in page and "offending rows [0, 1, 2]" in page
    index = (docs_dir / "index.html").read_text()
    assert "features.html" in index and "FAILED" in index


def test_index_lists_every_suite(docs_dir: Path) -> None:
    docs.write_site(docs_dir, "alpha", [{"subject": "", "stage": "s", "time": "t", "success": True,
                                         "batches": {}, "results": []}])
    docs.write_site(docs_dir, "beta", [{"subject": "", "stage": "s", "time": "t", "success": True,
                                        "batches": {}, "results": []}])
    index = (docs_dir / "index.html").read_text()
    assert "alpha.html" in index and "beta.html" in index


def test_disabled_and_unwritable(docs_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(docs.ENV_VAR, "off")
    assert docs.docs_dir() is None
    monkeypatch.delenv(docs.ENV_VAR)
    assert docs.docs_dir() == Path("reports/validation")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(docs.ENV_VAR, str(blocker / "docs"))
    ids = np.array(["a", "b"])
    validate_features(np.zeros((2, 2), np.float32), ids, ids)  # docs cannot be written: a warning, no error
    assert "Data Docs not written" in caplog.text
