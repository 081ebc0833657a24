"""A SIGKILLed canaries stage resumes from its finished shards and ends with the same numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.canaries.conftest import digits_features

REPO = Path(__file__).resolve().parents[2]


def _inputs(tmp: Path) -> tuple[Path, Path, Path]:
    fs = digits_features(300)
    feat, split = tmp / "features", tmp / "split"
    feat.mkdir()
    split.mkdir()
    np.savez(feat / "features.npz", X=fs.X, ids=fs.ids)
    (feat / "meta.json").write_text(json.dumps({"n_classes": 10}))
    pd.DataFrame({"id": fs.ids, "label": fs.y,
                  "role": np.where(fs.is_defender, "defender", "reserved")}).to_parquet(split / "membership.parquet")
    params = {"base": {"seed": 5, "device": "cpu"},
              "defenders": [{"name": "mlp", "kind": "torch_mlp", "hidden": [32], "epochs": 40, "batch_size": 16}],
              "game3": {"canaries": 20, "tau_steps": 3}, "lidp": {"trials": 24, "tau_quantiles": 3},
              "compute": {"block_trials": 2, "shard_trials": 2}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    return feat, split, tmp / "params.yaml"


def _cmd(tmp: Path, feat: Path, split: Path, params: Path, out: str, shards: str) -> list[str]:
    return [sys.executable, "-m", "stages.canaries", "--params", str(params), "--features", str(feat),
            "--split", str(split), "--out", str(tmp / out), "--shards", str(tmp / shards)]


def _finished(root: Path) -> list[Path]:
    """Finished shard files (temporary files of an interrupted write start with a dot)."""
    return [p for p in root.rglob("*.npz") if not p.name.startswith(".")] if root.exists() else []


def _env() -> dict[str, str]:
    return {**os.environ, "CI": "1", "PRIVAUDIT_TORCH_THREADS": "1"}


@pytest.mark.slow
def test_sigkill_then_resume_reuses_shards_and_matches(tmp_path: Path) -> None:
    feat, split, params = _inputs(tmp_path)
    ref = subprocess.run(_cmd(tmp_path, feat, split, params, "ref", "ref_shards"), cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    # interrupted run: SIGKILL as soon as one shard is on disk
    proc = subprocess.Popen(_cmd(tmp_path, feat, split, params, "out", "shards"), cwd=REPO, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not _finished(tmp_path / "shards"):
        assert proc.poll() is None, "the stage ended before any shard was written"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = {p: p.stat().st_mtime_ns for p in _finished(tmp_path / "shards")}
    assert not (tmp_path / "out").exists()
    total = 1 + 12
    assert 1 <= len(done) < total
    # resume
    res = subprocess.run(_cmd(tmp_path, feat, split, params, "out", "shards"), cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"{len(done)} of {total} shards already finished" in res.stdout
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())  # reused, not recomputed
    for exp in ("game3", "lidp"):
        with np.load(tmp_path / "ref" / "mlp" / f"{exp}.npz") as a, np.load(tmp_path / "out" / "mlp" / f"{exp}.npz") as b:
            assert sorted(a.files) == sorted(b.files)
            for k in a.files:
                np.testing.assert_array_equal(a[k], b[k])
