"""Catalogue: bad params (checked before any work), missing backbone weights, unwritable outputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from privaudit.data.sources import SourceData, save_source
from privaudit.data.sources.base import make_ids
from tests.catalogue.conftest import expect_failure, remove, stage_env, write_params

DP = {"name": "dp", "kind": "dp_sgd", "hidden": [8], "epochs": 1, "batch_size": 16}


def test_unknown_params_key(ws: Path) -> None:
    write_params(ws, split={"defender_fraktion": 0.5})
    remove(ws, "data/source")
    expect_failure(ws, "ingest", "split.defender_fraktion", "unknown key", absent=("data/source",))


def test_negative_epsilon(ws: Path) -> None:
    write_params(ws, defenders=[{**DP, "epsilon": -1.0}])
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "epsilon", "greater than 0", absent=("data/defenders",))


def test_delta_not_below_one(ws: Path) -> None:
    write_params(ws, defenders=[{**DP, "epsilon": 2.0, "delta": 1.0}])
    remove(ws, "data/defenders")
    expect_failure(ws, "defenders", "delta", "less than 1", absent=("data/defenders",))


def test_lidp_delta_not_below_one(ws: Path) -> None:
    write_params(ws, lidp={"delta": 1.5})
    expect_failure(ws, "canaries", "lidp.delta", "less than 1", absent=("data/canaries",))


def test_more_game3_canaries_than_defender_pool(ws: Path) -> None:
    """Game-3 canaries are distinct Defender samples: K above the pool is refused before training."""
    write_params(ws, game3={"canaries": 500})
    expect_failure(ws, "canaries", "game3.canaries=500 exceeds the 36 Defender samples", absent=("data/canaries",))


def test_more_lidp_canaries_than_reserved_pool(ws: Path) -> None:
    """LiDP mislabel canaries are drawn from the Reserved pool: K + m above it is refused."""
    write_params(ws, lidp={"canaries": 500})
    expect_failure(ws, "canaries", "lidp.canaries + lidp.null_canaries = 500 + 500 exceeds the canary pool",
                   absent=("data/canaries",))


def test_clipbkd_pool_larger_than_available(ws: Path) -> None:
    write_params(ws, lidp={"canary_type": "clipbkd", "clipbkd_pool": 1000})
    expect_failure(ws, "canaries", "lidp.clipbkd_pool=1000 exceeds min(n, d) = 6", absent=("data/canaries",))


def test_too_few_trials(ws: Path) -> None:
    write_params(ws, lidp={"trials": 1})
    expect_failure(ws, "canaries", "lidp.trials", absent=("data/canaries",))


def test_too_few_rounds(ws: Path) -> None:
    write_params(ws, ltu={"rounds": 0})
    expect_failure(ws, "ltu", "ltu.rounds", "greater than or equal to 1", absent=("data/ltu", "metrics/ltu.json"))


def test_missing_backbone_weights(ws: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    images = SourceData(
        X=rng.random((12, 3, 8, 8), dtype=np.float32), y=np.repeat(np.arange(3), 4).astype(np.int64),
        ids=make_ids("img", 12), meta={"name": "tiny-images", "n_classes": 3, "class_names": ["a", "b", "c"],
                                       "modality": "image", "image_shape": [3, 8, 8], "origin": "catalogue"})
    remove(ws, "data/source", "data/features")
    save_source(images, ws / "data" / "source")
    write_params(ws, featurize={"backbone": "torchvision:resnet18"})
    empty_home = tmp_path / "torch-home"
    empty_home.mkdir()
    expect_failure(ws, "featurize", "torchvision:resnet18", "resnet18-", str(empty_home), "never downloads",
                   absent=("data/features",), env=stage_env(ws, TORCH_HOME=str(empty_home)))


def test_output_directory_cannot_be_created(ws: Path) -> None:
    (ws / "blocked").write_text("a file where the output folder should be\n")
    expect_failure(ws, "ingest", "cannot create output directory", "blocked", args=("--out", "blocked/source"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_output_directory_read_only(ws: Path) -> None:
    out_parent = ws / "readonly"
    out_parent.mkdir()
    out_parent.chmod(0o555)
    try:
        expect_failure(ws, "ingest", "is not writable", "readonly", args=("--out", "readonly/source"))
    finally:
        out_parent.chmod(0o755)
