"""The auditor's self-check on a Gaussian mechanism with known ε (LiDP §4) via the lidp stage code."""

from __future__ import annotations

import pytest

from privaudit.config import parse_params
from stages.lidp import self_check


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_self_check_bound_is_below_the_true_epsilon(eps: float) -> None:
    p = parse_params({"defenders": [{"name": "l", "kind": "logistic_regression"}],
                      "lidp": {"trials": 400, "canaries": 20, "order": 2, "tau_quantiles": 24}})
    r = self_check(p, eps, dim=10_000)
    assert 0.0 <= r["eps_lower_bound"] <= eps and r["eps_lower_bound_k1"] <= eps
    assert all(v <= eps for k, v in r.items() if k.startswith("by_order"))
    if eps == 4.0:
        assert r["eps_lower_bound"] > 0.5
