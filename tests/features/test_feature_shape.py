"""``read_feature_shape``: the features' dimension and class count from ``meta.json`` alone (the plan stage's probes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privaudit.features.feature_set import FeatureShape, read_feature_shape


def test_reads_dim_and_classes(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps({"dim": 512, "n_classes": 10, "backbone": "identity"}))
    assert read_feature_shape(tmp_path) == FeatureShape(512, 10)


@pytest.mark.parametrize("meta, words", [({"dim": 4}, "needs integer 'dim' and 'n_classes'"),
                                         ({"dim": "x", "n_classes": 3}, "needs integer"),
                                         ({"dim": 0, "n_classes": 3}, "dim=0 and n_classes=3 must be >= 1")])
def test_refuses_what_it_cannot_use_naming_the_file(tmp_path: Path, meta: dict, words: str) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=words) as err:
        read_feature_shape(tmp_path)
    assert str(tmp_path / "meta.json") in str(err.value) and "featurize" in str(err.value)


def test_a_missing_file_names_the_stage_that_writes_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="meta.json not found .*dvc repro featurize"):
        read_feature_shape(tmp_path)
