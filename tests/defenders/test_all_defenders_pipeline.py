"""`dvc repro defenders` in a throw-away workspace with examples/params-all-defenders.yaml as params.yaml.

The README command ``cp examples/params-all-defenders.yaml params.yaml && dvc repro defenders``:
the example is used as it is (only ``dataset.max_samples`` shrunk), never merged into the
repository's params.yaml, which hid its missing keys before issue 28.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from privaudit.defenders.registry import known_kinds
from tests.pipeline.conftest import make_workspace, run

pytestmark = pytest.mark.slow  # ~1-3 min on 2 cores: every kind trains through the real stage


def test_every_kind_trains_through_dvc(repo_root: Path, tmp_path: Path) -> None:
    example = yaml.safe_load((repo_root / "examples" / "params-all-defenders.yaml").read_text())
    params = dict(example)  # as `cp` would copy it: no key borrowed from params.yaml
    params["dataset"]["max_samples"] = 500
    assert {d["kind"] for d in params["defenders"]} == set(known_kinds())
    ws = make_workspace(repo_root, tmp_path / "ws", params)
    shutil.copytree(repo_root / "examples", ws / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    run(["git", "add", "examples"], ws)  # the user_code stage refuses trainer files git does not track
    run([sys.executable, "-m", "dvc", "repro", "defenders"], ws)
    out = ws / "data" / "defenders"
    for spec in params["defenders"]:
        d = out / spec["name"]
        info = json.loads((d / "info.json").read_text())
        assert info["kind"] == spec["kind"] and (d / info["model_file"]).is_file()
        frame = pd.read_parquet(d / "outputs.parquet")
        probs = frame[[f"p_{c}" for c in range(10)]].to_numpy()
        assert len(frame) == 500 and np.allclose(probs.sum(axis=1), 1.0, atol=1e-6)
        assert set(frame["role"]) == {"defender", "reserved"}
        assert 0.0 <= info["utility"] <= 1.0 and np.isfinite(info["utility_stderr"])
        if spec["kind"] in ("dp_sgd", "pate", "alibi", "agibi"):
            assert 0 < info["claimed_epsilon"] <= spec["epsilon"] * (1 + 1e-9)
        elif spec["kind"] == "mip":
            assert info["claimed_epsilon"] is None and info["mip_eta"] == spec["eta"]
        else:
            assert info["claimed_epsilon"] is None
    # the stage is reproducible: a second repro finds nothing to do
    again = run([sys.executable, "-m", "dvc", "repro", "defenders"], ws)
    assert "didn't change" in again.stdout or "up to date" in again.stdout
