"""The auditor's self-check on a Gaussian mechanism with known ε (LiDP §4), as the lidp stage runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privaudit.config import parse_params
from privaudit.audits.lidp import LidpSettings
from privaudit.config import load_params
from privaudit.audits.lidp_self_check import SELF_CHECK_TRIALS, SelfCheckResult, gaussian_self_check
from stages.lidp import self_check_result

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_self_check_bound_is_below_the_true_epsilon(eps: float) -> None:
    p = parse_params({"defenders": [{"name": "l", "kind": "logistic_regression"}],
                      "lidp": {"trials": 400, "canaries": 20, "order": 2, "tau_quantiles": 24}})
    r = self_check_result(p, eps, dim=10_000, trials=400)
    assert r.passed and r.canaries == 20 and r.delta == p.lidp.delta and r.trials == 400
    assert 0.0 <= r.eps_lower_bound <= eps and r.eps_lower_bound_k1 <= eps
    assert r.by_order and all(v <= eps for v in r.by_order.values())
    if eps == 4.0:
        assert r.eps_lower_bound > 0.5
    r.raise_if_failed()


def test_self_check_is_reproducible_and_uses_its_generator() -> None:
    settings = LidpSettings(order=1, method="wilson", tune_fraction=0.5, pilot_fraction=0.125, tau_quantiles=16, tau_selection="split",
                            neighbourhood="add_remove", canary_type="mislabel")
    kw = dict(settings=settings, delta=1e-5, level=0.05, trials=200, canaries=14, null_canaries=14, dim=2_000)
    a = gaussian_self_check(4.0, rng=np.random.default_rng(3), **kw)
    b = gaussian_self_check(4.0, rng=np.random.default_rng(3), **kw)
    c = gaussian_self_check(4.0, rng=np.random.default_rng(4), **kw)
    assert a == b and a != c


def test_a_bound_above_the_truth_fails_the_self_check() -> None:
    bad = SelfCheckResult(epsilon=1.0, delta=1e-5, eps_lower_bound=1.2, eps_lower_bound_k1=0.4,
                          by_order={"order_1": 1.2}, canaries=20, order=1, method="wilson")
    assert not bad.passed
    with pytest.raises(ValueError, match="eps_hat 1.200 exceeds the true eps 1.0"):
        bad.raise_if_failed()


def test_the_readme_self_check_tests_something() -> None:
    """`python -m stages.lidp --self-check 2` on the shipped params: a positive ε̂ below 2 (it used to
    run the pipeline's 32 trials and print ε̂ = 0.000 for every interval, which tests nothing)."""
    proc = subprocess.run([sys.executable, "-m", "stages.lidp", "--params", "params.yaml", "--self-check", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = self_check_result(load_params(ROOT / "params.yaml"), 2.0, dim=100_000)
    assert r.trials == SELF_CHECK_TRIALS and 0.0 < r.eps_lower_bound <= 2.0 and r.tested
    assert f"eps_hat={r.eps_lower_bound:.3f} ({SELF_CHECK_TRIALS} trials" in proc.stdout


def test_too_few_trials_are_refused_not_passed() -> None:
    params = load_params(ROOT / "params.yaml")
    r = self_check_result(params, 2.0, dim=10_000, trials=params.lidp.trials)
    assert r.passed and not r.tested and r.eps_lower_bound == 0.0
    with pytest.raises(ValueError, match=rf"inconclusive: eps_hat = 0 at eps=2 with {params.lidp.trials} trials .*--trials"):
        r.raise_if_failed()
    with pytest.raises(ValueError, match=r"--trials must be at least 2 \(got 1\)"):
        self_check_result(params, 2.0, dim=10_000, trials=1)
