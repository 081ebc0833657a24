"""Catalogue: a damaged split or feature set reaching the defenders stage (GX suites 'split', 'features')."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tests.catalogue.conftest import expect_failure, load_npz, remove, rewrite_npz, stage_env, warm_runs

MEMBERSHIP = "data/split/membership.parquet"
FEATURES = "data/features/features.npz"


def test_defender_reserved_overlap(ws: Path) -> None:
    m = pd.read_parquet(ws / MEMBERSHIP)
    leaked = m[m["role"] == "reserved"].head(3).assign(role="defender")
    pd.concat([m, leaked], ignore_index=True).to_parquet(ws / MEMBERSHIP, index=False)
    remove(ws, "data/defenders")
    err = expect_failure(ws, "defenders", "validation suite 'split' failed", "Defender and Reserved are disjoint",
                         absent=("data/defenders",))
    assert str(leaked["id"].iloc[0]) in err  # names an offending id


def test_class_missing_on_defender_side(ws: Path) -> None:
    m = pd.read_parquet(ws / MEMBERSHIP)
    m.loc[m["label"] == 0, "role"] = "reserved"
    m.to_parquet(ws / MEMBERSHIP, index=False)
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "every class on the Defender side", "missing values [0]", absent=("data/defenders",))


def test_nan_and_inf_features(ws: Path) -> None:
    X = load_npz(ws / FEATURES)["X"].copy()
    X[2, 0], X[9, 3] = np.nan, np.inf
    rewrite_npz(ws / FEATURES, X=X)
    remove(ws, "data/defenders")
    err = expect_failure(ws, "defenders", "validation suite 'features' failed", "features are finite",
                         absent=("data/defenders",))
    assert "offending values [1, 1]" in err


def test_a_failing_stage_says_the_same_cold_as_on_the_warm_server(ws: Path) -> None:
    """The other cases run their stage on the worker's warm stage server (conftest); this one cold too (a fresh
    ``python -m stages.defenders`` process, as DVC runs it without ``privaudit warm``): the same exit code,
    contract and message."""
    X = load_npz(ws / FEATURES)["X"].copy()
    X[2, 0] = np.nan
    rewrite_npz(ws / FEATURES, X=X)
    remove(ws, "data/defenders")
    needles = ("validation suite 'features' failed", "features are finite")
    before = len(warm_runs())
    warm = expect_failure(ws, "defenders", *needles, absent=("data/defenders",))
    assert warm_runs()[before:] == ["stages.defenders"]  # the server ran it
    cold = expect_failure(ws, "defenders", *needles, absent=("data/defenders",), env=stage_env(ws, cold=True))
    assert len(warm_runs()) == before + 1  # not the server
    assert cold == warm


def test_wrong_feature_dimension(ws: Path) -> None:
    X = load_npz(ws / FEATURES)["X"]
    rewrite_npz(ws / FEATURES, X=np.hstack([X, X[:, :1]]))
    assert json.loads((ws / "data/features/meta.json").read_text())["dim"] == X.shape[1]
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", f"feature dimension is {X.shape[1]}", f"offending values [{X.shape[1] + 1}]",
                   absent=("data/defenders",))


def test_truncated_feature_file(ws: Path) -> None:
    blob = (ws / FEATURES).read_bytes()
    (ws / FEATURES).write_bytes(blob[:100])
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "features.npz is truncated or corrupt", absent=("data/defenders",))


def test_corrupt_membership_file(ws: Path) -> None:
    (ws / MEMBERSHIP).write_bytes(b"PAR1 definitely not parquet")
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "membership.parquet is truncated or corrupt", absent=("data/defenders",))


def test_unaligned_feature_ids(ws: Path) -> None:
    z = load_npz(ws / FEATURES)
    ids = z["ids"].copy()
    ids[0] = "csv-99999"
    rewrite_npz(ws / FEATURES, ids=ids)
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "features and membership table disagree on ids", "csv-99999",
                   absent=("data/defenders",))
