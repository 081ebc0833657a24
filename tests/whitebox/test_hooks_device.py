"""The white-box recording on the training device (issue 43): its per-step values stay on the parameters' device and
are read once, so on a GPU a watched step has no host read. The ``cuda`` case is skipped without a GPU (it is one of
``benchmarks/gpu_check.sh tests``); the ``cpu`` case checks the test itself.

On either device: a watched run of the ``dp_sgd`` defender releases the bits of an unwatched one (the canary is a
shadow), every step with rows measured the clipped canary at C = 2 (opacus clips: Δ_t = C·‖g‖/(‖g‖ + 1e−6)), the noise
has the declared variance σ²C² per coordinate, and nothing changed outside the watched steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit import hooks
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.testing.planted.opacus_bugs import tiny_data

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook", "ignore:.*empty")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                 reason="no CUDA device on this machine"))]


@pytest.mark.parametrize("device", DEVICES)
def test_a_watched_dp_sgd_run_on_the_device_is_observed_and_releases_the_unwatched_bits(device: str) -> None:
    X, y = tiny_data(n=400)
    spec = validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 2.0, "delta": 1e-5, "epochs": 4,
                                   "batch_size": 40, "lr": 0.5, "max_grad_norm": 2.0, "hidden": [16]},
                                  where="defenders[0]")
    plain = make_defender(spec, 3, device=device).fit(X, y, 9)
    with hooks.recording(seed=4, canary_scale=4.0) as rec:
        watched = make_defender(spec, 3, device=device).fit(X, y, 9)
        assert rec._coord.device.type == torch.device(device).type  # kept where the parameters train
    for a, b in zip(plain.net.state_dict().values(), watched.net.state_dict().values()):
        assert torch.equal(a, b)
    assert rec.release_changes(watched) == []
    obs = rec.observations()
    assert obs.steps == rec.steps == 40
    rows = obs.batch_rows > 0
    np.testing.assert_allclose(obs.sensitivity[rows], 2.0, rtol=1e-5)  # C = 2 (Δ_t, not Δ_t²)
    sigma = plain.noise_multiplier(len(X))
    per_coord = obs.noise_sq / obs.dimension
    assert abs(per_coord.mean() / (2.0 * sigma) ** 2 - 1.0) < 0.05, (per_coord.mean(), (2.0 * sigma) ** 2)
    assert np.isnan(obs.noise_cos[0]) and np.all(np.abs(obs.noise_cos[1:]) < 0.3)  # fresh noise every step
