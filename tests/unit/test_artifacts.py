from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from privaudit.artifacts import OutputError, atomic_dir, atomic_file, dumps_json, read_json, write_json


def test_atomic_dir_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "a.txt").write_text("partial")
            raise RuntimeError("boom")
    assert (target / "a.txt").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp leftovers


def test_atomic_file_keeps_old_content_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    write_json(target, {"a": 1})
    with pytest.raises(ValueError):
        with atomic_file(target) as fh:
            fh.write("{broken")
            raise ValueError("boom")
    assert read_json(target) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_json_is_canonical_and_finite() -> None:
    text = dumps_json({"b": np.float32(0.5), "a": [np.int64(2), math.inf, np.nan], "c": np.bool_(True)})
    assert text == dumps_json(json.loads(text))
    assert json.loads(text) == {"a": [2, None, None], "b": 0.5, "c": True}
    assert text.index('"a"') < text.index('"b"')


def test_unwritable_output_fails_early(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="cannot create output directory"):
        with atomic_dir(blocker / "sub" / "out"):
            pass


def test_read_json_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        read_json(bad)
