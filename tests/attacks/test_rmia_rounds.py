"""Offline RMIA's rounds grouped by their usable reference models give the numbers of one LR pass and one sort of
the population per round (the computation before the grouping, :mod:`privaudit.testing.scoring_reference`), bit
for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privaudit.attacks.ltu import LtuData, draw_rounds
from privaudit.attacks.mia_rmia import RmiaAttacker, rmia_scores, rmia_scores_few
from privaudit.defenders.specs import validate_defender_spec
from privaudit.testing.scoring_reference import rmia_guess_per_round

SPEC = validate_defender_spec({"name": "logreg", "kind": "logistic_regression"})


def _data(n: int, models: int, fraction: float, seed: int, levels: int | None) -> LtuData:
    """Synthetic table and reference confidences (``levels``: confidences rounded to that many values, so that
    LR values tie)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 2 * n)
    is_def = np.zeros(2 * n, bool)
    is_def[rng.permutation(2 * n)[:n]] = True
    proba = rng.dirichlet(np.ones(3), 2 * n)
    conf = rng.uniform(0.01, 0.99, (2 * n, models))
    if levels is not None:
        conf = np.round(conf * levels) / levels + 0.005
        proba = np.round(proba * levels) / levels + 0.001
    inside = np.zeros((2 * n, models), bool)
    inside[~is_def] = rng.random(((~is_def).sum(), models)) < fraction
    key = ("reserved_reference", models, fraction)
    return LtuData(X=np.zeros((2 * n, 1), np.float32), y=y, proba=proba, is_defender=is_def,
                   ids=np.arange(2 * n).astype(str), train_rows=np.flatnonzero(is_def), n_classes=3, spec=SPEC,
                   reference_cache={key: (conf, inside)})


@pytest.mark.parametrize(("models", "fraction", "levels"), [(1, 0.5, None), (3, 0.5, 4), (8, 0.5, None),
                                                              (8, 0.9, 3), (12, 0.3, None)])
@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_grouped_rounds_equal_the_rmia_guess_per_round(models: int, fraction: float, levels: int | None,
                                                  gamma: float) -> None:
    data = _data(150, models, fraction, seed=models, levels=levels)
    batch, _ = draw_rounds(data, 300, np.random.default_rng(1))
    attacker = RmiaAttacker(count=models, fraction=fraction, gamma=gamma)
    want = rmia_guess_per_round(attacker, batch)
    got = attacker.guess(batch)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(attacker.pool.usable, axis=0)) < len(batch)  # rounds did share their models


def test_a_reference_model_out_everywhere_and_ties_of_candidates() -> None:
    """Every usable model trained on a population row (NaN mean, Pr(x) = (1 − a)/2) and tied candidates."""
    data = _data(40, 2, 0.5, seed=7, levels=2)
    conf, inside = data.reference_cache[("reserved_reference", 2, 0.5)]
    inside[np.flatnonzero(~data.is_defender)[:10]] = True
    batch, _ = draw_rounds(data, 200, np.random.default_rng(3))
    attacker = RmiaAttacker(count=2, fraction=0.5)
    np.testing.assert_array_equal(attacker.guess(batch), rmia_guess_per_round(attacker, batch))


values = hnp.arrays(np.float64, st.integers(0, 40),
                    elements=st.one_of(st.floats(-3, 3, allow_nan=False), st.just(np.nan), st.sampled_from([0.0, 1.0])))


@settings(max_examples=300, deadline=None)
@given(lr_z=values, lr_x=hnp.arrays(np.float64, 2, elements=st.one_of(st.floats(-3, 3), st.just(np.nan),
                                                                      st.sampled_from([0.0, 1.0]))),
       gamma=st.sampled_from([1.0, 0.5, 3.0]))
def test_counting_equals_sorting(lr_z: np.ndarray, lr_x: np.ndarray, gamma: float) -> None:
    """Ties, NaN on either side, an empty population: the count is the sort's searchsorted."""
    np.testing.assert_array_equal(rmia_scores_few(lr_x, lr_z, gamma), rmia_scores(lr_x, lr_z, gamma))
