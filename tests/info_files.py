"""A defender's ``info.json`` as the defenders stage writes it, for tests that build a ``data/defenders`` folder
by hand (:func:`privaudit.defenders.info_file.read_defender_info` refuses an incomplete one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_info(defenders_dir: Path, name: str, /, **keys: Any) -> Path:
    """Write ``<defenders_dir>/<name>/info.json`` with the keys every record has, then ``keys`` on top."""
    path = Path(defenders_dir) / name / "info.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name, "model_file": "model.skops", "n_defender": 100, "n_classes": 10, **keys}))
    return path
