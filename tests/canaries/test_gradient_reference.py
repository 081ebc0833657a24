"""Random-gradient canaries with the canary-free reference displacement (``lidp.gradient_reference``).

On a 650-parameter head the data's own pull on θ projects onto a random canary gradient with a
spread several times the canary's effect; subtracting the mean displacement of canary-free heads
removes it (LiDP App. D.2, eq. 24 with a per-canary shift of τ).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.canaries.batched_runs import reference_displacement
from privaudit.canaries.runner import defender_recipe, run_trials
from privaudit.canaries.shards import Shard, run_shard
from privaudit.train import TrainData, initial_heads, train_heads
from tests.canaries.conftest import digits_features, make_params

DP8 = {"name": "dp", "kind": "dp_sgd", "epsilon": 8.0, "epochs": 10}


@pytest.fixture(scope="module")
def fs():  # type: ignore[no-untyped-def]
    return digits_features()


def _stats(fs, reference: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    p = make_params([DP8], lidp={"trials": 32, "canaries": 8, "null_canaries": 8,
                                 "canary_type": "random_gradient", "gradient_reference": reference},
                    compute={"block_trials": 32})
    out = run_trials(p, fs, "dp", "lidp", 0, 32, "cpu")
    return out["loss_in"].ravel(), out["loss_null"].ravel()


def test_reference_separates_inserted_from_null_canaries(fs) -> None:
    """The canary's shift −lr·(times sampled)·‖c‖²/B stays; the spread around it shrinks ≥ 2×."""
    a0, b0 = _stats(fs, 0)
    a1, b1 = _stats(fs, 16)
    d0 = (b0.mean() - a0.mean()) / b0.std()
    d1 = (b1.mean() - a1.mean()) / b1.std()
    assert b1.std() < 0.5 * b0.std(), (b0.std(), b1.std())
    assert d1 > 2 * d0 and d1 > 0.5, (d0, d1)
    # nulls are independent of the trained model: centred at 0 once the data's pull is removed
    assert abs(b1.mean()) < 3 * b1.std() / np.sqrt(len(b1))
    # same trials and canaries: the reference moves each statistic by ⟨c, Δ_ref⟩ only, so the mean
    # gap between inserted and null canaries agrees up to that term's sampling spread (4 s.e.)
    assert a1.mean() - b1.mean() == pytest.approx(a0.mean() - b0.mean(), abs=4 * b0.std() * np.sqrt(2 / len(a0)))


def test_reference_is_the_mean_canary_free_displacement(fs) -> None:
    p = make_params([DP8])
    recipe = defender_recipe(p, fs, "dp")
    assert recipe is not None
    ref = reference_displacement(recipe, fs, 4, seed=5, device="cpu")
    Xd, yd = fs.defender
    data = TrainData(torch.as_tensor(Xd), torch.as_tensor(yd), n_models=4)
    gen = torch.Generator().manual_seed(5)
    init = initial_heads(recipe, data, fs.n_classes, gen)
    heads = train_heads(recipe, data, fs.n_classes, gen, init=init)
    expect = (heads.flat() - init.flat()).double().mean(0).numpy()
    assert ref.shape == (heads.n_params(),)
    np.testing.assert_allclose(ref, expect, rtol=1e-6, atol=1e-9)
    assert not np.allclose(ref, reference_displacement(recipe, fs, 4, seed=6, device="cpu"))


def test_shards_of_gradient_trials_do_not_depend_on_the_partition(small_fs) -> None:
    """The reference is seeded by the defender, not the shard: two shards = one run."""
    p = make_params([DP8], lidp={"trials": 8, "canary_type": "random_gradient", "gradient_reference": 4},
                    compute={"block_trials": 4, "shard_trials": 4})
    whole = run_trials(p, small_fs, "dp", "lidp", 0, 8, "cpu")
    parts = [run_shard(p, small_fs, Shard("dp", "lidp", s, s + 4), "cpu") for s in (0, 4)]
    for key in ("loss_in", "loss_null"):
        np.testing.assert_array_equal(whole[key], np.concatenate([q[key] for q in parts]))
