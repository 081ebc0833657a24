"""Every defender kind on tiny data: shapes, probabilities, save/load, seed reproducibility."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privaudit.defenders.registry import known_kinds, make_defender, validate_defender_spec

USER = "examples/user_trainer.py"

SPECS: dict[str, dict] = {
    "sklearn": {"kind": "sklearn", "estimator": "random_forest", "randomness": "unseeded", "options": {"n_estimators": 10}},
    "logistic_regression": {"kind": "logistic_regression"},
    "torch_mlp": {"kind": "torch_mlp", "hidden": [16], "epochs": 3},
    "dp_sgd": {"kind": "dp_sgd", "epsilon": 4.0, "epochs": 2, "accountant": "rdp", "hidden": [8]},
    "alibi": {"kind": "alibi", "epsilon": 2.0, "hidden": [], "epochs": 3},
    "agibi": {"kind": "agibi", "epsilon": 4.0, "hidden": [], "epochs": 3, "postprocess": "simplex"},
    "pate": {"kind": "pate", "epsilon": 20.0, "teachers": 5, "query_fraction": 0.3},
    "mip": {"kind": "mip", "eta": 0.4, "half_splits": 3, "base": {"kind": "torch_mlp", "hidden": [], "epochs": 2}},
    "python": {"kind": "python", "target": f"{USER}:train", "loader": f"{USER}:load", "deterministic": True,
               "order_invariant": True},
}


def test_every_registered_kind_is_covered() -> None:
    assert sorted(SPECS) == known_kinds()


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_kind_trains_predicts_and_round_trips(kind: str, tiny, tmp_path: Path, repo_root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo_root)
    spec = validate_defender_spec({"name": f"t-{kind}", **SPECS[kind]}, where="defenders[0]")
    model = make_defender(spec, tiny.n_classes).fit(tiny.X, tiny.y, seed=11)
    proba = model.predict_proba(tiny.Xt)
    assert proba.shape == (len(tiny.yt), tiny.n_classes)
    assert np.all(proba >= 0) and np.allclose(proba.sum(axis=1), 1.0)
    path = tmp_path / f"model{model.model_suffix}"
    model.save(path)
    again = make_defender(spec, tiny.n_classes).load(path)
    np.testing.assert_allclose(again.predict_proba(tiny.Xt), proba, rtol=1e-5, atol=1e-6)
    # same seed -> same model, bit for bit (randomness only from the seed)
    twin = make_defender(spec, tiny.n_classes).fit(tiny.X, tiny.y, seed=11)
    np.testing.assert_array_equal(twin.predict_proba(tiny.Xt), proba)
    info = model.describe()
    assert info["kind"] == kind and isinstance(info["deterministic"], bool)
    if not model.deterministic:  # declared random: another seed gives another model
        other = make_defender(spec, tiny.n_classes).fit(tiny.X, tiny.y, seed=12)
        assert not np.array_equal(other.predict_proba(tiny.Xt), proba)
