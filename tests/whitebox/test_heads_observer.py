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
from privaudit.audits.whitebox import whitebox_audit_heads

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
    res = whitebox_audit_heads(_recipe(SIGMA), *digits, 10, models=12, seed=1, level=0.05)
    assert res.checks_passed, res.reasons
    assert 0.5 * claimed < res.epsilon <= claimed


def test_a_trainer_with_a_quarter_of_the_claimed_noise_is_caught(digits) -> None:
    claimed, _ = compose_epsilon([(SIGMA, Q, STEPS)], 1e-5, "prv")
    res = whitebox_audit_heads(_recipe(SIGMA / 4), *digits, 10, models=12, seed=1, level=0.05)
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


def test_recorded_summaries_match_their_definitions_over_steps() -> None:
    """‖N_t‖², Σ N_tj⁴, cos(N_{t−1}, N_t) and Σ_t N_tj² per model, against numpy on the same noise
    (the observer reuses alternating buffers across steps; a mix-up would pair the wrong steps)."""
    g = torch.Generator().manual_seed(5)
    noise = [torch.randn(3, 7, generator=g) for _ in range(4)]
    obs = HeadsObserver(seed=0)
    for t, n in enumerate(noise):
        obs.record(torch.full((3,), t), torch.ones(3), n)
    N = np.stack([n.double().numpy() for n in noise], axis=1)  # (M, T, P)
    for m, run in enumerate(obs.runs()):
        np.testing.assert_allclose(run.noise_sq, (N[m] ** 2).sum(1), rtol=1e-12)
        np.testing.assert_allclose(run.noise_quartic, (N[m] ** 4).sum(1), rtol=1e-12)
        cos = [(N[m, t - 1] @ N[m, t]) / np.sqrt((N[m, t - 1] ** 2).sum() * (N[m, t] ** 2).sum()) for t in range(1, 4)]
        assert np.isnan(run.noise_cos[0])
        np.testing.assert_allclose(run.noise_cos[1:], cos, rtol=1e-12)
        np.testing.assert_allclose(run.coord_sq, (N[m] ** 2).sum(0), rtol=1e-12)
        np.testing.assert_array_equal(run.batch_rows, [0, 1, 2, 3])
