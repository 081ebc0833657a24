"""White-box audit of the batched DP-SGD trainer: M heads are M audit runs, observed as whole tensors.

Golden: an honest recipe's ε̂ stays below the accountant's ε of its own σ, q, T (and is not
vacuous); planted fault: a trainer that adds a quarter of the noise it claims is caught (ε̂ above
the claim); the observer does not change the training draws.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from privaudit.stats.whitebox import compose_epsilon
from privaudit.train import DPSettings, HeadRecipe, TrainData, train_heads
from privaudit.train.observe import HeadsObserver
from privaudit.whitebox_audit import whitebox_audit_heads

SIGMA, Q, STEPS = 1.0, 0.1, 60


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    return (X[:300] / 16.0).astype(np.float32), y[:300]


def _recipe(sigma: float) -> HeadRecipe:
    return HeadRecipe(hidden=(), epochs=1, batch_size=30, lr=0.5,
                      dp=DPSettings(sigma, 1.0, Q, STEPS, Q * 300))


def test_honest_batched_dp_sgd_is_not_refuted_and_the_bound_is_not_vacuous(digits) -> None:
    claimed, _ = compose_epsilon([(SIGMA, Q, STEPS)], 1e-5, "prv")
    res = whitebox_audit_heads(_recipe(SIGMA), *digits, 10, models=12, seed=1)
    assert res.checks_passed, res.reasons
    assert 0.5 * claimed < res.epsilon <= claimed


def test_a_trainer_with_a_quarter_of_the_claimed_noise_is_caught(digits) -> None:
    claimed, _ = compose_epsilon([(SIGMA, Q, STEPS)], 1e-5, "prv")
    res = whitebox_audit_heads(_recipe(SIGMA / 4), *digits, 10, models=12, seed=1)
    assert res.epsilon > claimed


def test_the_observer_leaves_the_training_draws_alone(digits) -> None:
    X, y = (torch.tensor(a) for a in digits)
    data = TrainData(X, y, n_models=5)
    a, b = HeadsObserver(seed=1), HeadsObserver(seed=2)
    for obs in (a, b):
        train_heads(_recipe(SIGMA), data, 10, torch.Generator().manual_seed(7), observer=obs)
    ra, rb = a.runs(), b.runs()
    assert len(ra) == 5 and a.steps == STEPS
    for x, z in zip(ra, rb):  # same Poisson batches and noise; only the canary directions differ
        np.testing.assert_array_equal(x.batch_rows, z.batch_rows)
        np.testing.assert_array_equal(x.noise_sq, z.noise_sq)
        np.testing.assert_allclose(x.sensitivity, 1.0, rtol=1e-5)  # canary 4C clipped to C
    assert abs(np.mean([r.batch_rows.mean() for r in ra]) - Q * 300) < 3


def test_observer_needs_dp_sgd(digits) -> None:
    X, y = (torch.tensor(a) for a in digits)
    sgd = dataclasses.replace(_recipe(SIGMA), dp=None)
    with pytest.raises(ValueError, match="DP-SGD"):
        train_heads(sgd, TrainData(X, y, n_models=2), 10, torch.Generator(), observer=HeadsObserver(seed=0))
    with pytest.raises(ValueError, match="canary_scale"):
        HeadsObserver(seed=0, canary_scale=1.0)
