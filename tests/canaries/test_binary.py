"""Two-class data: Game 3 as the label-flip game, LiDP mislabel canaries as label flips."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from privaudit.attacks.game3 import game3_guesses
from privaudit.audits.game3 import game3_interval
from privaudit.canaries.batched_runs import game3_draw
from privaudit.canaries.designs import draw_mislabel, wrong_labels
from privaudit.canaries.runner import check_canary_setup, run_trials
from privaudit.features.feature_set import FeatureSet
from privaudit.validation import ValidationFailed, validate_canary_stats
from tests.canaries.conftest import LOGREG, MLP, make_params

TAUS = np.linspace(0.5, 0.99, 4)


@pytest.fixture(scope="module")
def binary_fs() -> FeatureSet:
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))[:300]
    X = X[idx]
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    is_def = np.zeros(len(idx), dtype=bool)
    is_def[:150] = True
    return FeatureSet(X=X, y=y[idx].astype(np.int64), ids=np.array([f"b{i}" for i in idx]), is_defender=is_def,
                      n_classes=2)


def test_game3_draw_is_the_label_flip_game_for_two_classes(binary_fs) -> None:
    d = game3_draw(binary_fs, 120, np.random.default_rng(3))
    assert (d["label_pair"] == [0, 1]).all() and d["label_pair"].shape == (120, 2)
    assert len(np.unique(d["canary_index"])) == 120
    np.testing.assert_array_equal(d["true_label"], binary_fs.defender[1][d["canary_index"]])
    trained = d["label_pair"][np.arange(120), d["bit"]]
    np.testing.assert_array_equal(trained, d["bit"])
    flipped = trained != d["true_label"]
    assert 30 < flipped.sum() < 90  # each canary's label is flipped with probability 1/2


def test_game3_draw_keeps_its_random_stream_for_more_classes(small_fs) -> None:
    """C >= 3 draws are unchanged by the C = 2 branch (same numbers as before)."""
    d = game3_draw(small_fs, 30, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    yd = small_fs.defender[1]
    idx = np.sort(rng.choice(len(yd), size=30, replace=False))
    pair = wrong_labels(yd[idx], small_fs.n_classes, 2, rng)
    bit = rng.integers(0, 2, size=30)
    for key, want in (("canary_index", idx), ("label_pair", pair), ("bit", bit)):
        np.testing.assert_array_equal(d[key], want)


def test_mislabel_canaries_flip_the_label_for_two_classes(binary_fs) -> None:
    Xr, yr = binary_fs.reserved
    draw = draw_mislabel(Xr, yr, 2, 50, np.random.default_rng(1))
    assert draw.y is not None and set(np.unique(draw.y)) <= {0, 1}
    rows = [int(np.flatnonzero((Xr == x).all(1))[0]) for x in draw.X]
    np.testing.assert_array_equal(draw.y, 1 - yr[rows])
    with pytest.raises(ValueError, match="only 1 exist"):
        wrong_labels(yr, 2, 2, np.random.default_rng(0))


@pytest.mark.parametrize("spec", [MLP, LOGREG])  # batched and sequential
def test_canary_runs_on_binary_data(binary_fs, spec) -> None:
    p = make_params([spec], game3={"canaries": 40}, lidp={"trials": 4})
    check_canary_setup(p, binary_fs)  # no longer "Game 3 needs >= 3 classes"
    g = run_trials(p, binary_fs, spec["name"], "game3", 0, 1, "cpu")
    assert g["proba"].shape == (1, 40, 2) and (g["label_pair"] == [0, 1]).all()
    flat = {k: g[k][0] for k in ("canary_index", "true_label", "label_pair", "bit", "proba")}
    validate_canary_stats("game3", flat)
    r = game3_interval(flat, TAUS, np.random.default_rng(0), level=0.025)
    assert 0.0 <= r["eps_low"] and r["canaries"] == 40
    lidp = run_trials(p, binary_fs, spec["name"], "lidp", 0, 4, "cpu")
    assert lidp["loss_in"].shape == (4, 2) and lidp["loss_null"].shape == (4, 2)
    assert np.isfinite(lidp["loss_in"]).all() and (lidp["loss_in"] >= 0).all()
    validate_canary_stats("lidp", lidp)


def test_label_flip_game_guesses_and_epsilon() -> None:
    """The adversary guesses the bit = the more confident label; a memorising model certifies ε > 0,
    a model that ignores the bit does not (Theorem B.1: P(correct) <= e^ε / (1 + e^ε))."""
    rng = np.random.default_rng(4)
    n = 400
    bit = rng.integers(0, 2, n)
    true = rng.integers(0, 2, n)
    pair = np.tile([0, 1], (n, 1))
    p1 = np.where(bit == 1, 0.995, 0.005)
    memorised = np.stack([1 - p1, p1], axis=1)
    guessed, correct = game3_guesses(memorised, pair, bit, TAUS)
    assert guessed.all() and correct.all()
    run = {"proba": memorised, "label_pair": pair, "bit": bit, "true_label": true}
    assert game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)["eps_low"] > 3.0
    q = rng.uniform(0.05, 0.95, n)  # confidence independent of the bit
    blind = {**run, "proba": np.stack([1 - q, q], axis=1)}
    assert game3_interval(blind, TAUS, np.random.default_rng(0), level=0.025)["eps_low"] < 0.5


def test_canary_suite_accepts_the_label_flip_pair_only() -> None:
    rng = np.random.default_rng(2)
    n = 6
    g = {"canary_index": np.arange(n) * 2, "true_label": np.arange(n) % 2, "label_pair": np.tile([0, 1], (n, 1)),
         "bit": rng.integers(0, 2, n), "proba": rng.dirichlet(np.ones(2), size=n).astype(np.float32)}
    validate_canary_stats("game3", g)
    bad = g["label_pair"].copy()
    bad[3] = [1, 0]
    with pytest.raises(ValidationFailed, match=r"label_pair is \(0, 1\) with 2 classes"):
        validate_canary_stats("game3", {**g, "label_pair": bad})
    with pytest.raises(ValidationFailed, match="C >= 2 classes"):
        validate_canary_stats("game3", {**g, "proba": np.ones((n, 1), dtype=np.float32)})
