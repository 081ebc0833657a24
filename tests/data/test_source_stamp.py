"""The ingest stage records the data set's identity and digest in ``data/source/meta.json`` (the release ledger)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.data.sources import (
    DataSourceError,
    SourceData,
    load_source,
    read_source,
    read_source_stamp,
    save_source,
    source_digest,
    stamp_source,
)
from privaudit.data.sources.base import make_ids

ROOT = Path(__file__).resolve().parents[2]

#: sha256 of the embedded digits arrays (X float32, y int64, ids <U12): the same on every run and machine
DIGITS_DIGEST = "c2a57ef9057e22bc69147bcafdb9d84e30ac50b4d3d6ba48525901510fdc18e4"


def small() -> SourceData:
    X = np.arange(24, dtype=np.float32).reshape(6, 4)
    return SourceData(X=X, y=np.array([0, 1, 0, 1, 0, 1], dtype=np.int64), ids=make_ids("t", 6),
                      meta={"name": "t", "n_classes": 2, "class_names": ["a", "b"], "modality": "tabular",
                            "image_shape": None, "origin": "test"})


def test_the_digits_digest_is_pinned() -> None:
    assert source_digest(load_source("digits")) == DIGITS_DIGEST


def test_every_change_of_the_data_changes_the_digest() -> None:
    base = small()
    digest = source_digest(base)
    assert source_digest(small()) == digest  # the same data, built again
    X = base.X.copy()
    X[2, 1] += 1e-3
    y = base.y.copy()
    y[0] = 1
    ids = base.ids.copy()
    ids[5] = "t-99999"
    order = np.array([1, 0, 2, 3, 4, 5])
    changed = [SourceData(X=X, y=base.y, ids=base.ids, meta=base.meta),
               SourceData(X=base.X, y=y, ids=base.ids, meta=base.meta),
               SourceData(X=base.X, y=base.y, ids=ids, meta=base.meta),
               base.subset(order), base.subset(np.arange(5))]
    digests = {source_digest(d) for d in changed}
    assert digest not in digests and len(digests) == len(changed)
    assert source_digest(SourceData(X=base.X, y=base.y, ids=base.ids, meta={**base.meta, "origin": "x"})) == digest


def test_stamp_round_trips_through_meta_json(tmp_path: Path) -> None:
    stamped = stamp_source(small(), "patients")
    save_source(stamped, tmp_path)
    stamp = read_source_stamp(tmp_path)
    assert (stamp.identity, stamp.digest) == ("patients", source_digest(small()))
    assert read_source(tmp_path).meta["identity"] == "patients"  # still a valid source


def test_an_old_meta_json_asks_for_a_rerun(tmp_path: Path) -> None:
    save_source(small(), tmp_path)
    with pytest.raises(DataSourceError, match=r"no data set identity and digest.*dvc repro -f -s ingest"):
        read_source_stamp(tmp_path)
    with pytest.raises(DataSourceError, match="run the ingest stage first"):
        read_source_stamp(tmp_path / "nothing")


def test_the_ingest_stage_records_identity_and_digest(tmp_path: Path) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"].update(identity="digits-clinic-a", max_samples=200)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "stages.ingest", "--params", str(tmp_path / "params.yaml"),
                    "--out", str(tmp_path / "source")], cwd=ROOT, check=True, capture_output=True)
    meta = json.loads((tmp_path / "source" / "meta.json").read_text(encoding="utf-8"))
    assert meta["identity"] == "digits-clinic-a"
    assert meta["digest"] == source_digest(read_source(tmp_path / "source"))


def test_dvc_yaml_reruns_ingest_on_the_identity_and_the_report_on_the_ledger() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "dataset.identity" in stages["ingest"]["params"]
    assert "releases.yaml" in stages["report"]["deps"]
    assert {"gate.total_budget", "dataset.identity", "dataset.name", "dataset.path"} <= set(stages["report"]["params"])
