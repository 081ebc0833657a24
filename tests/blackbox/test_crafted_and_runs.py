"""Crafted canaries, the many-run driver on the batched trainer and on plain trainers with planted bugs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from privaudit.testing.blackbox_runs import BlackboxAuditConfig, audit_batched_recipe, audit_trainer, certify_scores
from privaudit.canaries.crafted import canary_scores, clipped_scale, craft_canary, score_model
from privaudit.defenders.specs import validate_defender_spec
from privaudit.features.identity import standardize
from privaudit.train import TrainData, predict_proba, train_heads
from privaudit.defenders.recipes import recipe_from_spec
from privaudit.testing.planted.blackbox_plain_trainers import LinearSoftmax, PlainTrainer, true_epsilon


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    X = standardize(X)
    return X[::2].astype(np.float32), y[::2].astype(np.int64)


def test_canary_lies_in_the_unused_pixels(digits) -> None:
    X, y = digits
    c = craft_canary(X, y, 10)
    unused = np.flatnonzero(X.std(0) == 0)  # the constant pixel columns (0, 32, 39 on full digits)
    assert set(unused) >= {0, 32, 39}
    assert np.abs(c.direction[unused]).sum() == pytest.approx(np.abs(c.direction).sum(), rel=1e-6)
    assert c.data_energy < 1e-20 and c.scale == pytest.approx(3.0)
    assert c.label == int(np.argmin(np.bincount(y, minlength=10)))


def test_score_is_exactly_the_projected_weight_for_a_linear_model() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)); X[:, 3] = 0.0
    y = np.arange(40) % 4
    c = craft_canary(X, y, 4, scale=2.5, label=1)
    W, b = rng.normal(size=(4, 5)) * 30, rng.normal(size=4) * 30  # saturated softmax on purpose
    u = -np.full(4, 0.25); u[1] += 1; u /= np.linalg.norm(u)
    expect = 2.5 * float(u @ (W @ c.direction))
    assert score_model(LinearSoftmax(W, b), c) == pytest.approx(expect, rel=1e-6, abs=1e-6)


def test_crafting_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="n_classes"):
        clipped_scale(1)
    with pytest.raises(ValueError, match="non-finite"):
        craft_canary(np.array([[np.nan, 1.0]]), np.array([0]), 2)
    with pytest.raises(ValueError, match="label must lie"):
        craft_canary(np.eye(3), np.array([0, 1, 0]), 2, label=5)
    with pytest.raises(ValueError, match="shape"):
        canary_scores(np.ones((2, 3)), np.ones((2, 4)), craft_canary(np.eye(3), np.array([0, 1, 2]), 3))


def test_config_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="runs_in"):
        BlackboxAuditConfig(runs_in=2, level=0.05)
    with pytest.raises(ValueError, match="tune_fraction"):
        BlackboxAuditConfig(tune_fraction=1.0, level=0.05)
    with pytest.raises(ValueError, match="level"):
        BlackboxAuditConfig(level=0.0)


def _short_recipe(eps: float, n: int):
    spec = validate_defender_spec({"name": "h", "kind": "dp_sgd", "epsilon": eps, "delta": 1e-5, "epochs": 2,
                                   "batch_size": 64, "lr": 0.5, "max_grad_norm": 1.0})
    return recipe_from_spec(spec, n)


def test_honest_dp_sgd_never_flagged_beyond_level(digits) -> None:
    """Fast form: 200 independent audits (40 runs per side each) of honest DP-SGD (2 epochs, ε = 1):
    ε̂ (GDP view) and the assumption-free ε̂ above the claim in at most 5 % of them (≤ 17 of 200;
    P(Bin(200, 0.05) > 17) ≈ 0.04). Runs of all audits are trained in one batched call and split:
    every head is independent."""
    torch.set_num_threads(1)
    X, y = digits
    rec = _short_recipe(1.0, len(y))
    c = craft_canary(X, y, 10, clip_norm=1.0)
    reps, per = 200, 40
    M = reps * 2 * per
    valid = torch.zeros(M, 1, dtype=torch.bool)
    valid[: M // 2] = True
    data = TrainData(torch.from_numpy(X), torch.from_numpy(y), M, X_extra=torch.from_numpy(c.x).expand(M, 1, -1).contiguous(),
                     y_extra=torch.full((M, 1), c.label), extra_valid=valid)
    heads = train_heads(rec, data, 10, torch.Generator().manual_seed(11))
    p = predict_proba(heads, torch.from_numpy(c.queries)).numpy()
    s = canary_scores(p[:, 0], p[:, 1], c)
    s_in, s_out = s[: M // 2].reshape(reps, per), s[M // 2:].reshape(reps, per)
    flags_gdp = flags_rate = 0
    for i in range(reps):
        g, r, _, _ = certify_scores(s_in[i], s_out[i], tune_fraction=0.25, level=0.05, delta=1e-5)
        flags_gdp += g.eps_lower_bound_gdp > 1.0
        flags_rate += r.eps_lower_bound_rate > 1.0
    assert flags_gdp <= 17 and flags_rate <= 17


def test_batched_driver_has_power_at_eps8(digits) -> None:
    """ε = 8 default head, 300 runs per side: certifies a positive ε̂ below the heuristic ceiling's
    exact ε and reports the threat model, neighbourhood and assumption."""
    torch.set_num_threads(1)
    X, y = digits
    spec = validate_defender_spec({"name": "h", "kind": "dp_sgd", "epsilon": 8.0, "delta": 1e-5, "epochs": 20,
                                   "batch_size": 64, "lr": 0.5, "max_grad_norm": 1.0})
    rec = recipe_from_spec(spec, len(y))
    r = audit_batched_recipe(X, y, 10, rec,
                             BlackboxAuditConfig(runs_in=300, runs_out=300, seed=1, block=600, level=0.05))
    assert r.runs_in == 300 and r.tuning_in == 60
    assert 1.0 < r.eps_lower_bound < r.ceiling.eps_exact
    assert r.neighbourhood == "add_remove" and "black-box" in r.threat_model and "GDP" in r.assumption


@pytest.mark.parametrize("bug,framework,init,scaling,scale", [("no_noise", "numpy", "zero", "lr/B", None),
                                                              ("no_clip", "torch", "random", "lr", 30.0)])
def test_plain_trainer_bugs_caught(digits, bug, framework, init, scaling, scale) -> None:
    """Two planted bugs as plain trainers claiming ε = 1, caught from 40 runs per side; the correct
    recipe is not flagged on the same budget. ``no_clip`` with the default canary (s = 3, sized for
    C = 1) shows μ̂ ≈ 0.6 only (its gradient is at most ~4.5 C); a canary of scale 30 (unclipped
    gradient ∝ s) catches it — the scale for trainers whose clipping is unknown."""
    torch.set_num_threads(1)
    X, y = digits
    cfg = BlackboxAuditConfig(runs_in=40, runs_out=40, seed=5, tune_fraction=0.25, scale=scale, level=0.05)
    bad = audit_trainer(PlainTrainer(1.0, bug, 10, len(y), framework=framework, init=init, scaling=scaling), X, y, 10, cfg)
    assert math.isinf(true_epsilon(len(y), 1.0, bug))
    assert bad.eps_lower_bound > 1.0
    ok = audit_trainer(PlainTrainer(1.0, "correct", 10, len(y), framework=framework, init=init, scaling=scaling),
                       X, y, 10, cfg)
    assert ok.eps_lower_bound <= 1.0 and ok.eps_lower_bound_rate <= 1.0
