"""Issue 13: like-with-like comparisons, one error budget, and a gate that says NOT AUDITED."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.verdict.entry import assemble_entry
from privaudit.audits.protocol import audit_delta
from privaudit.claims.claim import PrivacyClaim
from privaudit.config import GateParams
from privaudit.claims.error_budget import DEFAULT_GATED, applicable_bounds, plan_budget
from privaudit.verdict.gate import NOT_AUDITED
from tests.report import synthetic

BUDGET = plan_budget(0.05, DEFAULT_GATED, applicable_bounds(observable=True, canary_audited=True, theory=True))


def _entry(claim: tuple[float, float, str] | None, **blocks: dict[str, Any] | None) -> dict[str, Any]:
    info = {"claimed_epsilon": None, "claimed_delta": None}
    if claim is not None:
        info = {"claimed_epsilon": claim[0], "claimed_delta": claim[1], "claimed_neighbourhood": claim[2]}
    return assemble_entry(info, BUDGET, name="d", audited=True, blocks=blocks)


def _gate(entry: dict[str, Any]) -> dict[str, Any]:
    m = synthetic.metrics()
    m["audit"]["dp_sgd"] = entry
    return synthetic.gate_of(m).to_json()["defenders"]["dp_sgd"]


def _all_bounds(eps: float, delta: float, nb: str = "add_remove") -> dict[str, dict[str, Any]]:
    lvl = BUDGET.level("lidp")
    return {
        "whitebox": {"eps_lower_bound": eps, "delta": delta, "neighbourhood": "add_remove", "level": lvl},
        "one_run": {"eps_lower_bound": eps, "delta": delta, "neighbourhood": "add_remove", "level": lvl},
        "blackbox": {"eps_lower_bound": eps, "eps_lower_bound_rate": eps, "delta": delta, "neighbourhood": "add_remove",
                     "level": lvl},
        "lidp": {"eps_lower_bound": eps, "eps_lower_bound_k1": eps, "trials": 32, "canaries": 6,
                 "delta": delta, "neighbourhood": nb, "level": lvl},
        "game3": {"eps_low": 0.0, "eps_high": 3.0, "canaries": 100, "delta": delta, "neighbourhood": "replace_label",
                  "level": lvl},
    }


# --------------------------------------------------------------------------- claims


@settings(max_examples=200, deadline=None, derandomize=True)
@given(eps=st.floats(0, 20), delta=st.floats(0, 1e-3))
def test_group_privacy_is_weaker_than_the_claim(eps: float, delta: float) -> None:
    c = PrivacyClaim(eps, delta, "add_remove")
    r = c.implied_for("replace_one")
    assert r is not None and r.epsilon == pytest.approx(2 * eps) and r.delta >= delta
    assert c.implied_for("replace_label") == PrivacyClaim(r.epsilon, r.delta, "replace_label")
    assert PrivacyClaim(eps, delta, "replace_one").implied_for("add_remove") is None
    assert PrivacyClaim(eps, delta, "replace_label").implied_for("replace_one") is None


def test_audit_delta_uses_the_claims_delta_in_the_audits_neighbourhood() -> None:
    claim = PrivacyClaim(1.0, 1e-2, "add_remove")
    assert audit_delta(claim, "add_remove", 1e-5) == 1e-2  # issue 13 item 1: not the global lidp.delta
    assert audit_delta(claim, "replace_one", 1e-5) == pytest.approx((1 + math.e) * 1e-2)
    assert audit_delta(None, "add_remove", 1e-5) == 1e-5


# --------------------------------------------------------------------------- the gate


def test_honest_bounds_pass() -> None:
    assert _gate(_entry((1.0, 1e-5, "add_remove"), **_all_bounds(0.9, 1e-5)))["passed"]


def test_replace_one_bound_is_compared_with_the_group_guarantee() -> None:
    """A replace-one LiDP bound of 1.5 does not violate an add/remove claim of 1 (it implies 2)."""
    blocks = _all_bounds(0.5, 1e-5)
    blocks["lidp"].update(eps_lower_bound=1.5, eps_lower_bound_k1=0.2, neighbourhood="replace_one",
                          delta=(1 + math.e) * 1e-5)
    entry = _entry((1.0, 1e-5, "add_remove"), **blocks)
    assert entry["violation"] is False and entry["lidp"]["compared_epsilon"]["lidp"] == pytest.approx(2.0)
    assert _gate(entry)["passed"]
    blocks["lidp"]["eps_lower_bound"] = 2.1
    failed = _gate(_entry((1.0, 1e-5, "add_remove"), **blocks))
    (reason,) = failed["reasons"]
    assert "lidp.eps_lower_bound = 2.1 > claimed ε 2" in reason and "implies (2, " in reason


def test_bound_at_another_delta_is_not_compared() -> None:
    """ε̂ at δ = 1e-5 says nothing against a (1, 1e-2) claim (issue 13 item 1)."""
    blocks = _all_bounds(0.5, 1e-2)
    blocks["lidp"].update(eps_lower_bound=2.1, delta=1e-5)
    entry = _entry((1.0, 1e-2, "add_remove"), **blocks)
    assert entry["violation"] is False
    assert _gate(entry)["passed"]


def test_label_dp_claim_ignores_add_remove_bounds_but_gates_game3() -> None:
    blocks = _all_bounds(3.0, 0.0)  # whitebox/one_run/lidp are add/remove: not comparable with label-DP
    gate = _gate(_entry((1.0, 0.0, "replace_label"), **blocks))
    assert gate["passed"], gate["reasons"]
    blocks["game3"]["eps_low"] = 1.2
    (reason,) = _gate(_entry((1.0, 0.0, "replace_label"), **blocks))["reasons"]
    assert "game3.eps_low = 1.2 > claimed ε 1" in reason


def test_only_gated_bounds_fail_the_gate() -> None:
    blocks = _all_bounds(0.5, 1e-5)
    blocks["lidp"]["eps_lower_bound_k1"] = 5.0  # lidp_k1 is diagnostic by default
    entry = _entry((1.0, 1e-5, "add_remove"), **blocks)
    assert entry["violation"] is False and entry["lidp"]["violation"] is True
    assert _gate(entry)["passed"]


def test_missing_gated_bound_says_not_audited() -> None:
    blocks = _all_bounds(0.5, 1e-5)
    blocks["whitebox"] = None  # e.g. the whitebox stage did not run for this defender
    gate = _gate(_entry((1.0, 1e-5, "add_remove"), **blocks))
    (reason,) = gate["reasons"]
    assert not gate["passed"] and NOT_AUDITED in reason and "whitebox" in reason


def test_nothing_comparable_says_not_audited() -> None:
    blocks = {k: v for k, v in _all_bounds(0.5, 1e-5).items() if k != "game3"}
    for b in blocks.values():
        b["neighbourhood"] = "add_remove"
    entry = assemble_entry({"claimed_epsilon": 1.0, "claimed_delta": 0.0, "claimed_neighbourhood": "replace_label"},
                           plan_budget(0.05, ["whitebox", "one_run", "lidp"], ["whitebox", "one_run", "lidp"]),
                           name="d", audited=True, blocks=blocks)
    gate = _gate(entry)
    assert not gate["passed"] and NOT_AUDITED in gate["reasons"][0]


def test_failed_assumption_check_fails_the_gate() -> None:
    blocks = _all_bounds(0.5, 1e-5)
    blocks["whitebox"]["failed_checks"] = ["batches are not Poisson-sampled"]
    (reason,) = _gate(_entry((1.0, 1e-5, "add_remove"), **blocks))["reasons"]
    assert reason.startswith("dp_sgd: whitebox audit rejected its assumption(s): batches are not Poisson")


def test_budget_levels_sum_to_beta() -> None:
    assert sum(BUDGET.levels[k] for k in BUDGET.gated) == pytest.approx(0.05)
    assert "gate.beta = 0.05" in BUDGET.sentence() and "Bonferroni" in BUDGET.sentence()
    with pytest.raises(ValueError, match="gate.bounds"):
        plan_budget(0.05, ["whitebx"], ["whitebox"])


def test_theory_check_is_diagnostic_when_left_out_of_gate_bounds() -> None:
    m = synthetic.metrics()
    m["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.95  # far beyond every bound of the claim
    gated = synthetic.gate_of(m)
    assert not gated.defenders["dp_sgd"].passed
    bounds = [b for b in GateParams().bounds if b != "theory"]
    shown = synthetic.gate_of(m, bounds=bounds)
    assert shown.defenders["dp_sgd"].passed, shown.defenders["dp_sgd"].reasons
