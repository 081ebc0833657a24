"""privaudit.hooks: a no-op outside a recording, exact observations of opacus's DPOptimizer inside."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer, DPPerLayerOptimizer
from torch import nn

from privaudit import hooks
from privaudit.defenders.registry import make_defender, validate_defender_spec

from privaudit.testing.planted.opacus_bugs import NoClipDPOptimizer, tiny_data

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook")


def _setup(cls: type = DPOptimizer, sigma: float = 1.5, C: float = 0.7, seed: int = 0, **kw):
    net = nn.utils.skip_init(nn.Linear, 8, 3)  # initialised below from a seeded generator, not the global RNG
    with torch.no_grad():
        net.weight.copy_(torch.randn(3, 8, generator=torch.Generator().manual_seed(seed)) * 0.1)
        net.bias.zero_()
    gsm = GradSampleModule(net)
    gen = torch.Generator().manual_seed(seed)
    opt = cls(torch.optim.SGD(gsm.parameters(), lr=0.1), noise_multiplier=sigma, max_grad_norm=C,
              expected_batch_size=16, generator=gen, **kw)
    return gsm, opt, gen


def _batch(rows: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 8, generator=g) * 3, torch.randint(0, 3, (rows,), generator=g)


def _step(gsm, opt, rows: int, seed: int = 0) -> None:
    x, y = _batch(rows, seed)
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(gsm(x), y).backward()
    opt.step()


def test_watch_outside_recording_is_identity() -> None:
    _, opt, _ = _setup()
    before = dict(vars(opt))
    assert not hooks.is_recording()
    assert hooks.watch(opt, dataset_size=100) is opt
    assert vars(opt).keys() == before.keys()  # nothing attached, methods not wrapped
    assert "clip_and_accumulate" not in vars(opt) and "add_noise" not in vars(opt)
    # even a non-DP optimizer passes through untouched outside a recording
    sgd = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)
    assert hooks.watch(sgd, dataset_size=1) is sgd


def test_dp_sgd_release_run_is_bit_identical(monkeypatch) -> None:
    """dp_sgd.fit calls watch once with the true n; the released weights equal an unhooked run's."""
    X, y = tiny_data(n=120)
    spec = validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 2.0, "epochs": 2, "batch_size": 20,
                                   "accountant": "gdp"},
                                  where="d")
    ref = make_defender(spec, 3).fit(X, y, seed=5)
    calls = []

    def identity(opt, *, dataset_size):
        calls.append(dataset_size)
        return opt

    monkeypatch.setattr(hooks, "watch", identity)
    other = make_defender(spec, 3).fit(X, y, seed=5)
    assert calls == [len(y)]
    for a, b in zip(ref.net.parameters(), other.net.parameters()):
        assert torch.equal(a, b)


def test_observes_rows_sensitivity_and_the_exact_noise() -> None:
    gsm, opt, gen = _setup(sigma=1.5, C=0.7)
    with hooks.recording(seed=3, canary_scale=4.0) as rec:
        assert hooks.watch(opt, dataset_size=500) is opt
        shadow = torch.Generator()
        sq = []
        for t, rows in enumerate((16, 9, 23)):
            shadow.set_state(gen.get_state())  # opacus draws the noise param by param from this generator
            noise = [torch.normal(0.0, 1.5 * 0.7, size=p.shape, generator=shadow) for p in opt.params]
            sq.append(sum(float((n.double() ** 2).sum()) for n in noise))
            _step(gsm, opt, rows, seed=t)
    obs = rec.observations()
    assert obs.steps == 3 and obs.dimension == 8 * 3 + 3
    assert obs.batch_rows.tolist() == [16, 9, 23]
    np.testing.assert_allclose(obs.sensitivity, 0.7, rtol=1e-5)  # the canary (norm 2.8) clipped to C
    np.testing.assert_allclose(obs.noise_sq, sq, rtol=1e-4)
    assert math.isnan(obs.noise_cos[0]) and np.all(np.abs(obs.noise_cos[1:]) < 1)
    assert obs.declared_dataset_size == 500 and obs.declared_noise_multiplier == 1.5
    assert obs.declared_max_grad_norm == pytest.approx(0.7)


def test_unclipped_canary_shows_scale_times_c() -> None:
    gsm, opt, _ = _setup(cls=NoClipDPOptimizer, C=1.0)
    with hooks.recording(seed=0, canary_scale=4.0) as rec:
        hooks.watch(opt, dataset_size=50)
        _step(gsm, opt, 10)
    np.testing.assert_allclose(rec.observations().sensitivity, 4.0, rtol=1e-5)


def test_user_code_sees_its_own_grad_sample_and_the_canary_stays_out_of_the_step() -> None:
    ref_gsm, ref_opt, _ = _setup()  # the same step, unwatched
    x, y = _batch(12)
    ref_opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(ref_gsm(x), y).backward()
    ref_opt.step()
    gsm, opt, _ = _setup()
    with hooks.recording(seed=0) as rec:
        hooks.watch(opt, dataset_size=50)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(gsm(x), y).backward()
        before = [p.grad_sample for p in opt.params]
        opt.step()
        after = [p.grad_sample for p in opt.params]
    assert all(a is b for a, b in zip(before, after))
    assert all(getattr(g, "_processed", False) for g in after)
    assert all(p.summed_grad.shape == p.shape for p in opt.params)
    assert rec.steps == 1
    for p, r in zip(opt.params, ref_opt.params):  # the data-only clipped sum and the same update, bit for bit
        assert torch.equal(p.summed_grad, r.summed_grad) and torch.equal(p, r)


def test_virtual_steps_get_one_canary_and_summed_rows() -> None:
    """BatchMemoryManager-style accumulation: skipped steps clip, the last one adds noise."""
    gsm, opt, _ = _setup(C=1.0)
    with hooks.recording(seed=0) as rec:
        hooks.watch(opt, dataset_size=100)
        for i, rows in enumerate((7, 5, 4)):
            x, y = _batch(rows, seed=i)
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(gsm(x), y).backward()
            if i < 2:
                opt.signal_skip_step(do_skip=True)
            opt.step()
    obs = rec.observations()
    assert obs.steps == 1 and obs.batch_rows.tolist() == [16]
    np.testing.assert_allclose(obs.sensitivity, 1.0, rtol=1e-5)


def test_per_layer_clipping_is_observed() -> None:
    gsm, opt, _ = _setup(cls=DPPerLayerOptimizer, C=[0.6, 0.8])
    with hooks.recording(seed=1) as rec:
        hooks.watch(opt, dataset_size=60)
        for t in range(3):
            _step(gsm, opt, 10, seed=t)
    sens = rec.observations().sensitivity
    assert np.all(sens > 0) and np.all(sens <= 1.0 + 1e-6)  # ≤ sqrt(0.6² + 0.8²)


def test_closed_recording_passes_through() -> None:
    """An optimizer watched by a finished recording steps exactly like an unwatched one."""
    gsm_a, opt_a, _ = _setup(seed=9)
    gsm_b, opt_b, _ = _setup(seed=9)
    with hooks.recording(seed=0):
        hooks.watch(opt_a, dataset_size=10)
    for t in range(3):
        _step(gsm_a, opt_a, 8, seed=t)
        _step(gsm_b, opt_b, 8, seed=t)
    for a, b in zip(opt_a.params, opt_b.params):
        assert torch.equal(a, b)


def test_errors_are_value_errors_naming_the_problem() -> None:
    _, opt, _ = _setup()
    with pytest.raises(ValueError, match="canary_scale"):
        with hooks.recording(seed=0, canary_scale=1.0):
            pass
    with pytest.raises(ValueError, match="seed"):
        with hooks.recording(seed=-1):
            pass
    with hooks.recording(seed=0) as rec:
        with pytest.raises(ValueError, match="do not nest"):
            with hooks.recording(seed=1):
                pass
        with pytest.raises(ValueError, match="DPOptimizer"):
            hooks.watch(torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1), dataset_size=5)
        with pytest.raises(ValueError, match="dataset_size"):
            hooks.watch(opt, dataset_size=0)
    with pytest.raises(hooks.WatchNotCalledError, match="watch"):
        rec.observations()
    with hooks.recording(seed=0) as rec2:
        hooks.watch(opt, dataset_size=5)
    with pytest.raises(ValueError, match="never added noise"):
        rec2.observations()
