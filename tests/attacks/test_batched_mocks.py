"""Batched mock defenders for ``retrain`` (Pedersen et al. 2022, Theorem 3) and LiRA/RMIA reference models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import privaudit.attacks.batched_mocks as bm
import privaudit.attacks.ltu_retrain as ltu_retrain
import privaudit.attacks.mia_reference as mia_reference
from privaudit.attacks.ltu import LtuData, draw_rounds, run_attacker, score_rounds
from privaudit.attacks.ltu_retrain import RetrainAttacker
from privaudit.attacks.mia_lira import LiraAttacker
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.train import TrainData, train_heads
from privaudit.defenders.recipes import recipe_from_spec


@pytest.fixture(autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ltu stage's mock trainings: bitwise-reproducible torch on CPU
    yield
    torch.set_num_threads(before)


def _digits(spec: DefenderSpecBase, n: int = 120, seed: int = 0) -> LtuData:
    from sklearn.datasets import load_digits

    Xa, ya = load_digits(return_X_y=True)
    idx = np.random.default_rng(seed).permutation(len(ya))[:2 * n]
    X, y = (Xa[idx] / 16).astype(np.float32), ya[idx].astype(np.int64)
    is_def = np.arange(2 * n) < n
    model = make_defender(spec, n_classes=10).fit(X[is_def], y[is_def], seed=5)
    return LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=np.arange(2 * n).astype(str),
                   train_rows=np.flatnonzero(is_def), n_classes=10, spec=spec, model=model)


def _torch_spec(randomness: str, hidden: list[int] | None = None, epochs: int = 3) -> DefenderSpecBase:
    return validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [8] if hidden is None else hidden,
                                   "epochs": epochs, "batch_size": 16, "randomness": randomness})


def _no_sequential(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise AssertionError("the sequential make_defender path was taken")


def test_order_key_replays_torch_mlp_defender_on_a_permuted_list() -> None:
    spec = _torch_spec("fixed", epochs=2)
    data = _digits(spec, n=60)
    rows = np.random.default_rng(3).permutation(len(data.y))[:50]
    recipe = recipe_from_spec(spec, len(rows), 10)
    assert recipe is not None and not recipe.shuffle
    heads = bm.train_mock_heads(recipe, data.X, data.y, rows[None], 10, torch.Generator().manual_seed(0))
    ref = make_defender(spec, n_classes=10).fit(data.X[rows], data.y[rows], seed=0)
    ours = bm.label_confidences(heads, torch.as_tensor(data.X), data.y)[:, 0]
    expected = ref.predict_proba(data.X)[np.arange(len(data.y)), data.y]
    np.testing.assert_allclose(ours, expected, atol=1e-5)


def test_order_key_of_wrong_shape_is_a_value_error() -> None:
    recipe = recipe_from_spec(_torch_spec("fixed"), 10, 3)
    assert recipe is not None
    data = TrainData(torch.zeros(10, 4), torch.zeros(10, dtype=torch.int64), n_models=2, order_key=torch.zeros(2, 7))
    with pytest.raises(ValueError, match=r"order_key has shape \(2, 7\)"):
        train_heads(recipe, data, 3, torch.Generator().manual_seed(0))


def test_theorem3_fixed_torch_mlp_is_fully_exposed_through_the_batched_path(monkeypatch) -> None:
    data = _digits(_torch_spec("fixed"))
    monkeypatch.setattr(ltu_retrain, "_mock_distances", _no_sequential)
    att = RetrainAttacker(n_jobs=1)
    res, _, _ = run_attacker(att, data, 20, np.random.default_rng(1))
    assert res.accuracy == 1.0 and res.privacy == 0.0
    assert res.extra["exact_match_rounds"] == 20 and att.last_batched_rounds == 20


def test_batched_path_is_taken_and_chunked_for_torch_heads(monkeypatch) -> None:
    data = _digits(_torch_spec("unseeded"), n=60)
    calls: list[int] = []
    real = bm.train_mock_heads

    def counting(recipe, X, y, rows, *a, **kw):  # type: ignore[no-untyped-def]
        calls.append(len(rows))
        return real(recipe, X, y, rows, *a, **kw)

    monkeypatch.setattr(ltu_retrain, "_mock_distances", _no_sequential)
    monkeypatch.setattr(bm, "train_mock_heads", counting)
    batch, _ = draw_rounds(data, 10, np.random.default_rng(0))
    d1 = RetrainAttacker(n_jobs=1, max_models=8).distances(batch)
    assert calls == [8, 8, 4] and d1.shape == (10, 2) and np.all(d1 > 0)
    batch, _ = draw_rounds(data, 10, np.random.default_rng(0))
    d2 = RetrainAttacker(n_jobs=1, max_models=8).distances(batch)
    np.testing.assert_array_equal(d1, d2)  # same params → same numbers
    with pytest.raises(ValueError, match="max_models must be >= 2, got 1"):
        RetrainAttacker(max_models=1)


def test_unseeded_torch_mlp_batched_and_sequential_retrain_agree_statistically() -> None:
    data = _digits(_torch_spec("unseeded", hidden=[], epochs=2), n=60)
    acc = {}
    for batched in (True, False):
        rng = np.random.default_rng(7)
        batch, truth = draw_rounds(data, 60, rng)
        att = RetrainAttacker(n_jobs=1, batched=batched)
        p = att.guess(batch)
        assert att.last_batched_rounds == (60 if batched else 0)
        acc[batched] = float(score_rounds(p, truth.d_first, np.random.default_rng(0)).mean())
    assert abs(acc[True] - acc[False]) <= 0.25, acc
    assert 0.4 <= acc[True] <= 1.0


def test_lira_reference_confidences_from_the_batched_path(monkeypatch) -> None:
    data = _digits(_torch_spec("unseeded", hidden=[], epochs=5), n=100)
    monkeypatch.setattr(mia_reference, "_fit_conf", _no_sequential)
    reserved = np.flatnonzero(~data.is_defender)
    K = 6
    conf, inside = mia_reference.train_reference_confidences(
        data.spec, 10, data.X, data.y, reserved, K, 0.5, np.random.default_rng(0), max_models=4)  # type: ignore[arg-type]
    assert conf.shape == inside.shape == (len(data.y), K)
    assert np.all((conf > 0) & (conf < 1)) and np.all(inside.sum(0) == 50) and not inside[data.is_defender].any()
    for k in range(K):
        assert conf[inside[:, k], k].mean() > conf[~inside[:, k] & ~data.is_defender, k].mean()
    res, _, _ = run_attacker(LiraAttacker(4), data, 10, np.random.default_rng(2))
    assert res.rounds == 10 and 0.0 <= res.accuracy <= 1.0
