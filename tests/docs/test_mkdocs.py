"""The user guide builds with ``mkdocs build --strict``: every page in the nav, every link and anchor resolves,
the API pages' docstrings render, and the params reference is generated from the code."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_guide_builds_strictly(tmp_path: Path) -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(m.split(".")[0]) is None
               or (m == "mkdocstrings_handlers.python" and importlib.util.find_spec(m) is None)]
    if missing:
        pytest.skip(f"mkdocs is not installed here ({', '.join(missing)} missing): pip install -e '.[test]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    site = tmp_path / "site"
    params = (site / "reference" / "params" / "index.html").read_text(encoding="utf-8")
    assert "ltu.rounds" in params and "kind: dp_sgd" in params  # the generated tables are in the page
    api = (site / "reference" / "api" / "verdict" / "index.html").read_text(encoding="utf-8")
    assert "evaluate_gate" in api  # mkdocstrings rendered the docstrings
    user = (site / "reference" / "api" / "user" / "index.html").read_text(encoding="utf-8")
    assert "predict_proba" in user and "watch" in user
