"""kind: python — user trainers by import path, their persistence and declared properties."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from privaudit.defenders.registry import make_defender, validate_defender_spec

USER = "examples/user_trainer.py"
SKLEARN_TRAINER = '''
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import FunctionTransformer
import os
import re

def train(X, y, n_classes, seed, C=1.0):
    return LogisticRegression(C=C, random_state=seed, max_iter=500).fit(X, y)

def evil(X, y, n_classes, seed):
    return FunctionTransformer(func=os.system)
'''


@pytest.fixture(autouse=True)
def _at_repo_root(repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo_root)


def test_example_trainer_round_trip(tiny, tmp_path: Path) -> None:
    spec = validate_defender_spec({"name": "u", "kind": "python", "target": f"{USER}:train",
                                   "loader": f"{USER}:load", "options": {"temperature": 2.0},
                                   "deterministic": True, "order_invariant": True, "claimed_epsilon": 3.0})
    m = make_defender(spec, 10).fit(tiny.X, tiny.y, seed=0)
    p = m.predict_proba(tiny.Xt)
    assert p.shape == (len(tiny.yt), 10) and np.allclose(p.sum(axis=1), 1)
    assert np.mean(p.argmax(axis=1) == tiny.yt) > 0.8
    m.save(tmp_path / "model.bin")
    np.testing.assert_allclose(make_defender(spec, 10).load(tmp_path / "model.bin").predict_proba(tiny.Xt), p)
    perm = np.random.default_rng(0).permutation(len(tiny.y))  # declared order invariant: it is
    np.testing.assert_allclose(make_defender(spec, 10).fit(tiny.X[perm], tiny.y[perm], seed=5).predict_proba(tiny.Xt),
                               p, rtol=1e-5)
    info = m.describe()
    assert info["deterministic"] and info["order_invariant"] and info["claimed_epsilon"] == 3.0


def test_sklearn_estimator_is_saved_with_skops(tiny, tmp_path: Path) -> None:
    mod = tmp_path / "my_trainer.py"
    mod.write_text(SKLEARN_TRAINER)
    spec = validate_defender_spec({"name": "u", "kind": "python", "target": f"{mod}:train", "options": {"C": 0.5}})
    m = make_defender(spec, 10).fit(tiny.X[:100], tiny.y[:100], seed=0)
    m.save(tmp_path / "model.bin")
    again = make_defender(spec, 10).load(tmp_path / "model.bin")
    np.testing.assert_allclose(again.predict_proba(tiny.Xt), m.predict_proba(tiny.Xt))
    # a file holding a callable to os.system is refused
    bad = validate_defender_spec({"name": "u", "kind": "python", "target": f"{mod}:evil"})
    import skops.io as sio
    from sklearn.preprocessing import FunctionTransformer

    sio.dump(FunctionTransformer(func=os.system), tmp_path / "evil.bin")
    with pytest.raises(ValueError, match="untrusted types"):
        make_defender(bad, 10).load(tmp_path / "evil.bin")


@pytest.mark.parametrize("target", ["no_such_pkg.mod:train", "examples/missing.py:train", f"{USER}:nope", "nocolon"])
def test_bad_target_names_the_key(target: str) -> None:
    with pytest.raises(ValueError, match=r"defenders\[3\]\.target"):
        validate_defender_spec({"name": "u", "kind": "python", "target": target}, where="defenders[3]")


def test_trainer_without_predict_proba_is_rejected(tiny, tmp_path: Path) -> None:
    mod = tmp_path / "bad_trainer.py"
    mod.write_text("def train(X, y, n_classes, seed):\n    return object()\n")
    spec = validate_defender_spec({"name": "u", "kind": "python", "target": f"{mod}:train"})
    with pytest.raises(ValueError, match="no predict_proba"):
        make_defender(spec, 10).fit(tiny.X, tiny.y, seed=0)


@pytest.mark.parametrize("source, expected", [
    ("def train(X, y, n_classes, seed, C=1.0)\n    return None\n",
     r"SyntaxError in .*broken_trainer\.py line 1: expected ':'"),
    ("import math\nSCALE = undefined_name\n",
     r"raised NameError: name 'undefined_name' is not defined \(at .*broken_trainer\.py line 2\)"),
])
def test_a_trainer_that_fails_to_import_is_one_line_naming_the_key(tmp_path: Path, source: str,
                                                                    expected: str) -> None:
    """A syntax error or an error raised while the user's file is imported fails validation naming
    ``defenders[i].target``, the file and line — not a traceback through pydantic (the walkthrough found one)."""
    mod = tmp_path / "broken_trainer.py"
    mod.write_text(source)
    with pytest.raises(ValueError, match=r"defenders\[3\]\.target") as err:
        validate_defender_spec({"name": "u", "kind": "python", "target": f"{mod}:train"}, where="defenders[3]")
    assert re.search(expected, str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


def test_a_trainer_file_imports_a_helper_beside_it(tiny, tmp_path: Path) -> None:
    """``from helper import x`` of a helper.py next to the trainer file works, as under ``python trainer.py``
    (the user_code stage hashes such a helper: it must be importable too)."""
    folder = tmp_path / "trainers_beside"
    folder.mkdir()
    (folder / "beside_helper_61.py").write_text("C_DEFAULT = 0.5\n")
    (folder / "mine.py").write_text("from beside_helper_61 import C_DEFAULT\n" + SKLEARN_TRAINER.replace(
        "C=1.0", "C=C_DEFAULT"))
    spec = validate_defender_spec({"name": "u", "kind": "python", "target": f"{folder / 'mine.py'}:train"})
    model = make_defender(spec, 10).fit(tiny.X[:100], tiny.y[:100], seed=0)
    assert model.model.C == 0.5


def test_a_state_dict_model_without_a_loader_names_the_defender_and_the_fix(tiny, tmp_path: Path) -> None:
    """A trainer returning a torch module (no scikit-learn estimator) and no ``loader``: saving says which
    defender entry needs what, not ``defenders[?].loader``."""
    spec = validate_defender_spec({"name": "mine", "kind": "python", "target": f"{USER}:train"})
    model = make_defender(spec, 10).fit(tiny.X, tiny.y, seed=0)
    with pytest.raises(ValueError, match=r"add `loader: path/file\.py:load`.*defenders entry named 'mine'") as err:
        model.save(tmp_path / "model.bin")
    assert "[?]" not in str(err.value)
