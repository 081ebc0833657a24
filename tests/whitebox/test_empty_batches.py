"""``dp_sgd`` routes empty Poisson batches through opacus, so the hook observes them as B_t = 0."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit import hooks
from privaudit.defenders.registry import make_defender, validate_defender_spec

from privaudit.testing.planted.opacus_bugs import tiny_data

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook")


def _spec(batch_size: int):
    return validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 2.0, "epochs": 2,
                                   "batch_size": batch_size, "accountant": "gdp"}, where="d")


def test_empty_batches_are_observed_as_zero_rows() -> None:
    X, y = tiny_data(n=60)
    with hooks.recording(seed=1, canary_scale=4.0) as rec:
        model = make_defender(_spec(1), 3).fit(X, y, seed=7)  # q = 1/60: most batches are empty
    obs = rec.observations()
    assert obs.steps == model.steps_taken  # every step, empty or not, went through the optimizer
    assert (obs.batch_rows == 0).sum() > obs.steps // 4
    assert (obs.batch_rows > 0).any()
    assert np.isfinite(obs.noise_sq).all() and (obs.noise_sq > 0).all()
    for p in model.net.parameters():
        assert torch.isfinite(p).all()


def test_mostly_empty_batches_train_finite_reproducible_weights() -> None:
    """The NaN mean loss of an empty batch never reaches the weights, and the seed fixes them."""
    X, y = tiny_data(n=60)
    spec = _spec(1)
    a = make_defender(spec, 3).fit(X, y, seed=3)
    b = make_defender(spec, 3).fit(X, y, seed=3)
    for pa, pb in zip(a.net.parameters(), b.net.parameters()):
        assert torch.equal(pa, pb) and torch.isfinite(pa).all()
