"""Issue 35: a user's torch trainer runs where base.device says: a train() that declares `device` gets it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privaudit.defenders.registry import make_defender
from privaudit.defenders.specs import PythonSpec

TRAINER = '''from sklearn.linear_model import LogisticRegression

SEEN = []


def with_device(X, y, n_classes, seed, device="cpu"):
    SEEN.append(device)
    return LogisticRegression(max_iter=200).fit(X, y)


def without_device(X, y, n_classes, seed):
    return LogisticRegression(max_iter=200).fit(X, y)
'''


@pytest.mark.parametrize(("target", "options", "want"), [("with_device", {}, "cuda"),
                                                         ("with_device", {"device": "cpu"}, "cpu"),
                                                         ("without_device", {}, None)])
def test_a_trainer_that_declares_device_gets_base_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         target: str, options: dict, want: str | None) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dev_trainer.py").write_text(TRAINER)
    spec = PythonSpec(name="mine", kind="python", target=f"dev_trainer.py:{target}", options=options)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)).astype(np.float32), np.arange(40) % 2
    from privaudit.defenders.user_target import resolve_target

    seen = resolve_target("dev_trainer.py:with_device").__globals__["SEEN"]
    seen.clear()
    # the device string is only handed over: no CUDA is needed to see it arrive
    make_defender(spec, n_classes=2, device="cuda").fit(X, y, seed=1)
    assert seen == ([] if want is None else [want])
