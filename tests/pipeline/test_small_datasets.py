"""The whole DVC pipeline on small user tables: a binary one and a 3-class one under 400 rows.

Binary data sets once stopped in the canaries stage ("Game 3 needs >= 3 classes"); with two
classes Game 3 is now the label-flip game and ACGR is reported as null. Small data sets once
stopped there too, after the defenders and ltu stages had run, because ``game3.canaries: 200``
exceeded the Defender set; ``auto`` now scales it to the Defender set, and sizes that cannot fit
stop the split stage, before any training.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.datasets import load_breast_cancer, load_wine

from privaudit.canaries.sizes import resolve_game3_canaries
from tests.pipeline.conftest import make_workspace, merged_params, run

DVC = [sys.executable, "-m", "dvc"]
STAGES = ("ingest", "split", "featurize", "defenders", "ltu", "canaries", "game3", "blackbox", "lidp", "audit", "bounds", "report")


def _write_csv(path: Path, X: np.ndarray, labels: np.ndarray) -> None:
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["label"] = labels
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def _binary(path: Path) -> None:
    """sklearn's breast-cancer table (569 rows, 30 features), text labels."""
    X, y = load_breast_cancer(return_X_y=True)
    _write_csv(path, X, np.where(y == 1, "benign", "malignant"))


def _three_class(path: Path) -> None:
    """sklearn's wine table: 178 rows, 13 features, 3 classes."""
    X, y = load_wine(return_X_y=True)
    _write_csv(path, X, y)


def _dataset(name: str) -> dict:
    return {"name": "csv", "path": f"data/external/{name}.csv", "label_column": "label", "max_samples": None}


#: a small version of the default params for the binary run (two-class data is the point there);
#: the 3-class run keeps every other default (game3.canaries included: it must resolve to fit)
BINARY_OVERRIDES = {
    "base": {"seed": 5, "device": "cpu"},
    "dataset": _dataset("binary"),
    "defenders": [
        {"name": "logreg", "kind": "logistic_regression"},
        {"name": "dp", "kind": "dp_sgd", "hidden": [], "epsilon": 2.0, "epochs": 3, "batch_size": 64},
    ],
    "ltu": {"rounds": 100},
    "lidp": {"trials": 6, "tau_quantiles": 4},
    "blackbox": {"runs": 40, "runs_no_claim": 20, "sequential_runs": 8, "block": 40},
    "report": {"table1": None},
}
SMALL_OVERRIDES = {"base": {"seed": 5, "device": "cpu"}, "dataset": _dataset("wine")}

CASES = {"binary": (_binary, BINARY_OVERRIDES, 2), "wine": (_three_class, SMALL_OVERRIDES, 3)}


@pytest.mark.slow  # about 90 s of CPU per case (10 stages with their imports) on 2 cores
@pytest.mark.parametrize("case", sorted(CASES))
def test_pipeline_on_small_tables(case: str, repo_root: Path, tmp_path: Path) -> None:
    write, overrides, n_classes = CASES[case]
    params = merged_params(overrides)
    ws = make_workspace(repo_root, tmp_path / "ws", params)
    write(ws / "data" / "external" / f"{case}.csv")
    out = run(DVC + ["repro"], ws)
    for stage in STAGES:
        assert f"Running stage '{stage}'" in out.stdout, out.stdout

    source_meta = json.loads((ws / "data/source/meta.json").read_text())
    assert source_meta["n_classes"] == n_classes
    membership = pd.read_parquet(ws / "data/split/membership.parquet")
    n_def = int((membership["role"] == "defender").sum())
    expected = resolve_game3_canaries(n_def, params["game3"]["canaries"], params["game3"]["tau_selection"])
    assert f"Game 3 with {expected} canaries" in out.stdout, out.stdout

    audit = json.loads((ws / "metrics/audit.json").read_text())
    game3 = json.loads((ws / "data/audit/game3.json").read_text())
    names = {d["name"] for d in params["defenders"]}
    assert set(audit) == set(game3) == names
    for name in names:
        g3 = audit[name]["game3"]
        assert g3["canaries"] == expected and 0 <= g3["eps_low"]
        meta = json.loads((ws / f"data/canaries/{name}/meta.json").read_text())
        assert meta["game3"]["canaries"] == expected and meta["game3"]["n_classes"] == n_classes
        with np.load(ws / f"data/canaries/{name}/game3.npz") as z:
            pair, true, bit, proba = z["label_pair"], z["true_label"], z["bit"], z["proba"]
        assert proba.shape == (expected, n_classes) and set(np.unique(bit)) <= {0, 1}
        if n_classes == 2:  # the label-flip game: both labels, trained on label_pair[bit] = bit
            assert (pair == [0, 1]).all() and (true != bit).any() and (true == bit).any()
            assert g3["acgr"] is None and game3[name]["acgr"] is None
        else:
            assert (pair != true[:, None]).all() and isinstance(g3["acgr"], dict)
        assert audit[name]["lidp"]["trials"] == params["lidp"]["trials"]
    gate = json.loads((ws / "metrics/gate.json").read_text())
    assert set(gate["defenders"]) == names and isinstance(gate["passed"], bool)
    assert (ws / "reports/audit.html").is_file()
    for d in params["defenders"]:
        if d["kind"] == "dp_sgd":  # issue 27: its release run is recorded by the defenders stage and pooled
            wb = audit[d["name"]]["whitebox"]
            assert wb["release_run_observed"] is True and wb["runs"] == params["whitebox"]["runs"] + 1, wb
            assert (ws / f"data/defenders/{d['name']}/release_observations.npz").is_file()
    if case == "binary":
        return

    # a forced rerun of the defenders writes byte-identical model files (skops and safetensors,
    # whose metadata order used to change per process): dvc.lock and the outputs stay as they were
    lock = (ws / "dvc.lock").read_bytes()
    run(DVC + ["repro", "--force", "-s", "defenders"], ws)
    assert (ws / "dvc.lock").read_bytes() == lock
    # user_code and environment are always_changed by design (they re-hash the user's trainer files
    # and re-read the package versions on every repro), and so is history (it records every run)
    status = run(DVC + ["status"], ws).stdout
    for stage in ("user_code", "environment", "history"):
        assert f"{stage}:\n\talways changed" in status, status
        status = status.replace(f"{stage}:\n\talways changed", "")
    assert "changed" not in status, status

    # a game3.canaries the Defender set cannot hold stops the split stage, before any training
    params["game3"]["canaries"] = 200
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = run(DVC + ["repro"], ws, check=False)
    assert proc.returncode != 0 and "Running stage 'split'" in proc.stdout, proc.stdout
    assert f"stage split failed: game3.canaries=200 exceeds the {n_def} Defender samples" in proc.stderr, proc.stderr
    assert f"game3.canaries: auto (here {expected})" in proc.stderr
    for stage in STAGES[2:]:
        assert f"Running stage '{stage}'" not in proc.stdout, proc.stdout
