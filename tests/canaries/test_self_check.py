"""The auditor's self-check on a Gaussian mechanism with known ε (LiDP §4), as the lidp stage runs it."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.config import parse_params
from privaudit.audits.lidp import LidpSettings
from privaudit.audits.lidp_self_check import SelfCheckResult, gaussian_self_check
from stages.lidp import self_check_result


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_self_check_bound_is_below_the_true_epsilon(eps: float) -> None:
    p = parse_params({"defenders": [{"name": "l", "kind": "logistic_regression"}],
                      "lidp": {"trials": 400, "canaries": 20, "order": 2, "tau_quantiles": 24}})
    r = self_check_result(p, eps, dim=10_000)
    assert r.passed and r.canaries == 20 and r.delta == p.lidp.delta
    assert 0.0 <= r.eps_lower_bound <= eps and r.eps_lower_bound_k1 <= eps
    assert r.by_order and all(v <= eps for v in r.by_order.values())
    if eps == 4.0:
        assert r.eps_lower_bound > 0.5
    r.raise_if_failed()


def test_self_check_is_reproducible_and_uses_its_generator() -> None:
    settings = LidpSettings(order=1, method="wilson", tune_fraction=0.5, pilot_fraction=0.125, tau_quantiles=16, tau_selection="split",
                            neighbourhood="add_remove", canary_type="mislabel")
    kw = dict(settings=settings, delta=1e-5, beta=0.05, trials=200, canaries=14, null_canaries=14, dim=2_000)
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
