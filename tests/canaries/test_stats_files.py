"""Issue 36: one reader of ``data/canaries/<defender>/``, validating on read (the black-box file was read
unchecked before)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privaudit.canaries.stats_files import CANARY_FILES, read_canary_meta, read_canary_stats
from privaudit.validation import ValidationFailed
from tests.import_graph import ROOT


@pytest.mark.parametrize("experiment", ["game3", "lidp", "blackbox"])
def test_a_missing_file_names_itself_and_the_fix(tmp_path: Path, experiment: str) -> None:
    with pytest.raises(FileNotFoundError, match=rf"{CANARY_FILES[experiment]} .*canaries"):
        read_canary_stats(tmp_path / "d" / CANARY_FILES[experiment], experiment)  # type: ignore[arg-type]


def test_black_box_statistics_are_validated_on_read(tmp_path: Path) -> None:
    path = tmp_path / "blackbox.npz"
    score, included = np.array([0.1, 0.2, 0.3, 0.4]), np.array([1, 1, 0, 0])
    np.savez(path, score=score, included=included)
    assert set(read_canary_stats(path, "blackbox")) == {"score", "included"}
    np.savez(path, score=np.array([0.1, np.nan, 0.3, 0.4]), included=included)
    with pytest.raises(ValidationFailed):
        read_canary_stats(path, "blackbox")
    np.savez(path, score=score, included=np.array([1, 0, 0, 0]))  # one run with the canary: too few
    with pytest.raises(ValidationFailed):
        read_canary_stats(path, "blackbox")


def test_meta_is_an_object_or_absent(tmp_path: Path) -> None:
    assert read_canary_meta(tmp_path) == {}
    (tmp_path / "meta.json").write_text(json.dumps({"blackbox": {"n_train": 900}}))
    assert read_canary_meta(tmp_path)["blackbox"]["n_train"] == 900
    (tmp_path / "meta.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="meta.json must hold a JSON object"):
        read_canary_meta(tmp_path)


def test_no_other_module_opens_the_statistics_files() -> None:
    src = ROOT / "src" / "privaudit"
    readers = [p.relative_to(src).as_posix() for p in src.rglob("*.py")
               if p.name != "stats_files.py" and any(f'"{f}"' in p.read_text() for f in CANARY_FILES.values())]
    assert readers == []
