"""The split stage checks the data-dependent canary sizes before any training (in-process, fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.config import ParamsError, parse_params
from privaudit.data.sources import SourceData, save_source
from privaudit.data.sources.base import make_ids
from stages._runner import run_stage
from stages.split import _args, _body

N_PER_CLASS = 20  # 3 classes x 20 rows: 30 Defender / 30 Reserved samples
BASE = {"base": {"seed": 1, "device": "cpu"}, "defenders": [{"name": "logreg", "kind": "logistic_regression"}],
        "lidp": {"trials": 4}}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), N_PER_CLASS).astype(np.int64)
    X = (rng.normal(size=(len(y), 4)) + y[:, None]).astype(np.float32)
    data = SourceData(X=X, y=y, ids=make_ids("t", len(y)),
                      meta={"name": "t", "n_classes": 3, "class_names": ["a", "b", "c"], "modality": "tabular", "image_shape": None,
                            "origin": "test"})
    save_source(data, tmp_path / "source")
    return tmp_path / "source"


def _split(tmp_path: Path, source: Path, **blocks: dict) -> tuple[int, Path]:
    raw = {**BASE, **blocks}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "split"
    code = run_stage("split", _args, _body, argv=["--params", str(tmp_path / "params.yaml"), "--source", str(source),
                                                  "--out", str(out)])
    return code, out


@pytest.mark.parametrize("blocks, words", [
    ({"game3": {"canaries": 200}}, ["game3.canaries=200 exceeds the 30 Defender samples", "game3.canaries: auto (here 7)"]),
    ({"game3": {"canaries": 3, "tau_selection": "split"}}, ["game3.canaries=3 is below the 4 canaries"]),
    ({"game3": {"canaries": 10}, "lidp": {"trials": 4, "canaries": 20}},
     ["lidp.canaries + lidp.null_canaries = 20 + 20 exceeds the canary pool of 30 Reserved samples"]),
    ({"game3": {"canaries": 10}, "lidp": {"trials": 4, "canary_type": "clipbkd", "clipbkd_pool": 10}},
     ["lidp.clipbkd_pool=10 exceeds min(n, d) = 4"]),
])
def test_sizes_that_do_not_fit_stop_the_split_stage(tmp_path, source, capsys, blocks, words) -> None:
    code, out = _split(tmp_path, source, **blocks)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("stage split failed: "), err
    for w in words:
        assert w in err, err
    assert not out.exists()


def test_sizes_that_fit_are_printed(tmp_path, source, capsys) -> None:
    code, out = _split(tmp_path, source, game3={"canaries": 10})
    assert code == 0 and (out / "membership.parquet").is_file()
    assert "split: 30 Defender / 30 Reserved samples" in capsys.readouterr().out


def _auto_supported() -> bool:
    try:
        parse_params({**BASE, "game3": {"canaries": "auto"}})
    except ParamsError:
        return False
    return True


@pytest.mark.skipif(not _auto_supported(), reason="config.Game3Params.canaries does not accept 'auto' yet")
def test_auto_resolves_to_the_defender_set(tmp_path, source, capsys) -> None:
    code, _ = _split(tmp_path, source, game3={"canaries": "auto"})
    assert code == 0
    assert "Game 3 with 7 canaries (game3.canaries: auto)" in capsys.readouterr().out
