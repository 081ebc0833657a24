"""The featurize stage fits the identity backbone on Reserved rows only (in-process, fast).

A Defender row is under audit: if it moved the column statistics, every released feature (and so
every model trained on them) would depend on it outside the audited recipe.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from privaudit.artifacts import read_json
from privaudit.data.sources import SourceData, read_source, save_source
from privaudit.data.sources.base import make_ids
from privaudit.data.split import read_membership
from stages import featurize as featurize_stage
from stages import split as split_stage
from stages._runner import run_stage

PARAMS = {"base": {"seed": 1, "device": "cpu"}, "defenders": [{"name": "logreg", "kind": "logistic_regression"}],
          "lidp": {"trials": 4}, "game3": {"canaries": 6}}


def _source(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    save_source(SourceData(X=X.astype(np.float32), y=y, ids=make_ids("t", len(y)),
                           meta={"name": "t", "n_classes": 3, "class_names": ["a", "b", "c"], "modality": "tabular",
                                 "image_shape": None, "origin": "test"}), path)


def _run(stage, name: str, tmp: Path, *argv: str) -> None:
    assert run_stage(name, stage._args, stage._body, argv=["--params", str(tmp / "params.yaml"), *argv]) == 0


def _features(tmp: Path, X: np.ndarray, y: np.ndarray, tag: str) -> tuple[np.ndarray, dict, np.ndarray]:
    src, split, feats = tmp / f"source-{tag}", tmp / "split", tmp / f"features-{tag}"
    _source(src, X, y)
    if not split.exists():
        _run(split_stage, "split", tmp, "--source", str(src), "--out", str(split))
    _run(featurize_stage, "featurize", tmp, "--source", str(src), "--split", str(split), "--out", str(feats))
    with np.load(feats / "features.npz") as z:
        Z = z["X"]
    roles = read_membership(split).set_index("id").loc[read_source(src).ids.astype(str), "role"].to_numpy()
    return Z, read_json(feats / "meta.json"), roles == "defender"


def test_features_do_not_depend_on_defender_rows(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20).astype(np.int64)
    X = rng.normal(size=(60, 4)) + y[:, None]
    Z, meta, is_def = _features(tmp_path, X, y, "a")
    assert meta["fitted_on"] == "reserved" and meta["fit_rows"] == int((~is_def).sum()) == 30
    np.testing.assert_allclose(Z[~is_def].mean(axis=0), 0.0, atol=1e-5)

    # move one Defender row far away: every other row's features stay bit-identical
    i = int(np.flatnonzero(is_def)[0])
    X2 = X.copy()
    X2[i] += 1e3
    Z2, _, _ = _features(tmp_path, X2, y, "b")
    others = np.arange(60) != i
    assert Z2[others].tobytes() == Z[others].tobytes()
    assert not np.array_equal(Z2[i], Z[i])
