"""Issue 34: an exception from a user's trainer names the defender, the user's file:line and the exception in
one line, then the user's frames; user trainers train before the built-in defenders, so a broken one fails
before they are retrained. Runs the split, featurize and defenders stages in-process on a tiny table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.data.sources import SourceData, save_source
from privaudit.data.sources.base import make_ids
from privaudit.defenders.user_errors import UserCodeError
from stages import defenders as defenders_stage
from stages import featurize as featurize_stage
from stages import split as split_stage
from stages._runner import run_stage

BAD = '''import numpy as np


def helper(X, y):
    raise ValueError("Expected input batch_size (32) to match target batch_size (33).")


def train(X, y, n_classes, seed):
    return helper(X, y)
'''


def _prepare(tmp: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)
    save_source(SourceData(X=X, y=y, ids=make_ids("t", len(y)),
                           meta={"name": "t", "n_classes": 3, "class_names": ["a", "b", "c"], "modality": "tabular",
                                 "image_shape": None, "origin": "test"}), tmp / "source")
    (tmp / "bad_trainer.py").write_text(BAD)
    params = {"base": {"seed": 1, "device": "cpu"}, "lidp": {"trials": 4}, "game3": {"canaries": 6},
              "defenders": [{"name": "logreg", "kind": "logistic_regression"},
                            {"name": "mine", "kind": "python", "target": "bad_trainer.py:train"}]}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    for stage, name, argv in ((split_stage, "split", ["--source", "source", "--out", "split"]),
                              (featurize_stage, "featurize", ["--source", "source", "--split", "split", "--out",
                                                              "features"])):
        assert run_stage(name, stage._args, stage._body, argv=["--params", "params.yaml", *argv]) == 0


def test_a_trainer_that_raises_is_named_with_its_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _prepare(tmp_path)
    capsys.readouterr()
    code = run_stage("defenders", defenders_stage._args, defenders_stage._body,
                     argv=["--params", "params.yaml", "--features", "features", "--split", "split", "--out", "out"])
    captured = capsys.readouterr()
    assert code == 1
    first, *rest = captured.err.strip().splitlines()
    assert first.startswith("stage defenders failed: defender 'mine': bad_trainer.py:train raised ValueError: "
                            "Expected input batch_size (32) to match target batch_size (33).")
    assert first.endswith("bad_trainer.py:5 in helper"), first
    frames = "\n".join(rest)
    assert "bad_trainer.py\", line 9, in train" in frames and "bad_trainer.py\", line 5, in helper" in frames
    assert "privaudit" not in frames  # only the user's frames
    assert "defenders: logreg" not in captured.out  # the user's trainer ran first: nothing else was retrained
    assert not (tmp_path / "out").exists()  # nothing partial written


def test_user_code_error_survives_pickling() -> None:
    import pickle

    err = UserCodeError("defender 'x': f.py:train raised KeyError: 'a' at f.py:3 in train", "  File ...\n")
    back = pickle.loads(pickle.dumps(err))
    assert back.summary == err.summary and back.frames == err.frames
