"""Release gate: each threshold, error bars, missing metrics, the exact DESIGN shape."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.verdict.metrics_files import AuditMetrics, parse_gate
from privaudit.config import GateParams
from privaudit.verdict.gate import evaluate_gate
from tests.report import synthetic


def run(m: dict[str, Any], **params: Any) -> dict[str, Any]:
    """Evaluate the gate on synthetic metrics with the given params; the ``metrics/gate.json`` object."""
    return synthetic.gate_of(m, **params).to_json()


def reasons_of(gate: dict[str, Any], defender: str) -> list[str]:
    """The reasons of one defender."""
    return gate["defenders"][defender]["reasons"]


# --------------------------------------------------------------------------- shape and defaults


def test_exact_design_shape(metrics: dict[str, Any]) -> None:
    gate = run(metrics)
    assert set(gate) == {"passed", "reasons", "defenders"}
    assert isinstance(gate["passed"], bool)
    assert isinstance(gate["reasons"], list) and all(isinstance(r, str) for r in gate["reasons"])
    assert set(gate["defenders"]) == {"logreg", "dp_sgd"}
    for entry in gate["defenders"].values():
        assert set(entry) == {"passed", "reasons"}
        assert isinstance(entry["passed"], bool)
        assert entry["passed"] == (entry["reasons"] == [])
    assert json.loads(json.dumps(gate)) == gate
    assert parse_gate(gate).to_json() == gate


def test_default_audit_fails_non_dp_logreg_only(metrics: dict[str, Any]) -> None:
    gate = run(metrics)
    assert gate["passed"] is False
    assert gate["defenders"]["dp_sgd"] == {"passed": True, "reasons": []}
    logreg = reasons_of(gate, "logreg")
    assert len(logreg) == 2  # both attackers below min_privacy; utility fine
    assert all("gate.min_privacy = 0.2" in r and r.startswith("logreg: ") for r in logreg)
    assert any("attacker model_diff" in r and "0.04" in r for r in logreg)
    assert any("attacker gap" in r and "0.14" in r for r in logreg)
    assert gate["reasons"] == logreg


def test_defaults() -> None:
    p = GateParams()
    assert (p.min_privacy, p.min_utility, p.max_epsilon_excess) == (0.2, 0.5, 0.0)
    assert p.fail_on_theory_violation is True and p.use_error_bars is True


def test_passes_when_thresholds_are_met(metrics: dict[str, Any]) -> None:
    del metrics["ltu"]["logreg"], metrics["audit"]["logreg"], metrics["bounds"]["logreg"]
    gate = run(metrics)
    assert gate == {
        "passed": True,
        "reasons": [],
        "defenders": {"dp_sgd": {"passed": True, "reasons": []}},
    }


# --------------------------------------------------------------------------- params validation


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min_privacy", 1.5),
        ("min_privacy", -0.1),
        ("min_utility", 2.0),
        ("max_epsilon_excess", -1.0),
    ],
)
def test_params_out_of_range_name_the_key(key: str, value: float) -> None:
    with pytest.raises(ValueError, match=key):
        GateParams(**{key: value})


def test_params_reject_unknown_key() -> None:
    with pytest.raises(ValueError, match="min_privcy"):
        GateParams.model_validate({"min_privcy": 0.3})


# --------------------------------------------------------------------------- privacy threshold


def test_min_privacy_boundary_with_error_bars(metrics: dict[str, Any]) -> None:
    entry = metrics["ltu"]["dp_sgd"]
    lower = min(
        entry["privacy"] - entry["privacy_stderr"],
        *(a["privacy"] - a["privacy_stderr"] for a in entry["attackers"].values()),
    )
    assert run(metrics, min_privacy=lower - 1e-9)["defenders"]["dp_sgd"]["passed"]
    failed = run(metrics, min_privacy=lower + 1e-6)
    assert not failed["defenders"]["dp_sgd"]["passed"]
    (reason,) = reasons_of(failed, "dp_sgd")
    assert "dp_sgd: LTU privacy (attacker model_diff) - stderr" in reason
    assert "gate.min_privacy" in reason and "0.9" in reason


def test_error_bars_are_pessimistic(metrics: dict[str, Any]) -> None:
    """Point estimate 0.9 clears 0.85; 0.9 - 0.07 does not. A noisier audit must not help."""
    assert run(metrics, min_privacy=0.85, use_error_bars=False)["defenders"]["dp_sgd"]["passed"]
    assert not run(metrics, min_privacy=0.85, use_error_bars=True)["defenders"]["dp_sgd"]["passed"]


def test_without_error_bars_reason_shows_point_estimate(metrics: dict[str, Any]) -> None:
    gate = run(metrics, min_privacy=0.95, use_error_bars=False)
    (reason,) = reasons_of(gate, "dp_sgd")
    assert reason == "dp_sgd: LTU privacy (attacker model_diff) = 0.9 < gate.min_privacy = 0.95"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    privacy=st.floats(0, 1),
    small=st.floats(0, 0.3),
    extra=st.floats(0, 0.3),
    threshold=st.floats(0, 1),
)
def test_larger_stderr_never_turns_fail_into_pass(
    privacy: float, small: float, extra: float, threshold: float
) -> None:
    """Property: with error bars, a less precise audit can only make passing harder."""

    def passes(stderr: float) -> bool:
        ltu = {
            "d": {
                "privacy": privacy,
                "privacy_stderr": stderr,
                "utility": 1.0,
                "utility_stderr": 0.0,
            }
        }
        audit = {"d": {"claimed_epsilon": None}}
        return evaluate_gate(AuditMetrics.parse(ltu, audit, {}), GateParams(min_privacy=threshold)).passed

    if not passes(small):
        assert not passes(small + extra)


def test_strongest_attacker_is_checked_even_if_top_level_is_not_it(metrics: dict[str, Any]) -> None:
    """Every attacker is checked: a weaker top level cannot hide a stronger attacker."""
    metrics["ltu"]["dp_sgd"]["attackers"]["gap"].update(privacy=0.1, privacy_stderr=0.01)
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "attacker gap" in reason and "gate.min_privacy" in reason


def test_attackers_only_entry(metrics: dict[str, Any]) -> None:
    entry = metrics["ltu"]["dp_sgd"]
    for key in ("privacy", "privacy_stderr", "accuracy", "attacker"):
        del entry[key]
    assert run(metrics)["defenders"]["dp_sgd"]["passed"]
    entry["attackers"]["model_diff"]["privacy"] = 0.05
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "attacker model_diff" in reason


def test_missing_privacy_stderr_is_derived_from_accuracy_and_rounds(
    metrics: dict[str, Any],
) -> None:
    entry = metrics["ltu"]["dp_sgd"]
    del entry["privacy_stderr"], entry["attackers"]
    expected = 2 * math.sqrt(0.55 * 0.45 / synthetic.ROUNDS)
    threshold = entry["privacy"] - expected
    assert run(metrics, min_privacy=threshold - 1e-9)["defenders"]["dp_sgd"]["passed"]
    assert not run(metrics, min_privacy=threshold + 1e-6)["defenders"]["dp_sgd"]["passed"]
    del entry["rounds"]
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "no valid standard error" in reason and "gate.min_privacy" in reason


def test_nan_privacy_fails(metrics: dict[str, Any]) -> None:
    metrics["ltu"]["dp_sgd"]["privacy"] = float("nan")
    reasons = reasons_of(run(metrics), "dp_sgd")
    assert any("not finite" in r and "gate.min_privacy" in r for r in reasons)


# --------------------------------------------------------------------------- utility threshold


def test_min_utility(metrics: dict[str, Any]) -> None:
    entry = metrics["ltu"]["dp_sgd"]
    lower = entry["utility"] - entry["utility_stderr"]
    assert run(metrics, min_utility=lower - 1e-9)["defenders"]["dp_sgd"]["passed"]
    (reason,) = reasons_of(run(metrics, min_utility=lower + 1e-6), "dp_sgd")
    assert reason.startswith("dp_sgd: LTU utility - stderr = ")
    assert "gate.min_utility" in reason
    assert run(metrics, min_utility=lower + 1e-6, use_error_bars=False)["defenders"]["dp_sgd"][
        "passed"
    ]


def test_missing_utility_and_stderr(metrics: dict[str, Any]) -> None:
    del metrics["ltu"]["dp_sgd"]["utility_stderr"]
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "LTU utility" in reason and "no valid standard error" in reason
    assert run(metrics, use_error_bars=False)["defenders"]["dp_sgd"]["passed"]
    del metrics["ltu"]["dp_sgd"]["utility"]
    (reason,) = reasons_of(run(metrics, use_error_bars=False), "dp_sgd")
    assert reason == "dp_sgd: LTU utility is missing; required >= gate.min_utility = 0.5"


# --------------------------------------------------------------------------- claimed ε


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("lidp.eps_lower_bound", ("lidp", "eps_lower_bound")),
        ("lidp.eps_lower_bound_k1", ("lidp", "eps_lower_bound_k1")),
        ("game3.eps_low", ("game3", "eps_low")),
    ],
)
def test_audited_epsilon_above_claim_fails(
    metrics: dict[str, Any], source: str, path: tuple[str, str]
) -> None:
    metrics["audit"]["dp_sgd"][path[0]][path[1]] = 1.3
    gate = run(metrics)
    (reason,) = reasons_of(gate, "dp_sgd")
    assert reason == (
        f"dp_sgd: audited ε lower bound {source} = 1.3 > claimed ε 1 + gate.max_epsilon_excess 0 = 1"
    )
    assert gate["passed"] is False
    assert run(metrics, max_epsilon_excess=0.3)["defenders"]["dp_sgd"]["passed"]
    assert not run(metrics, max_epsilon_excess=0.29)["defenders"]["dp_sgd"]["passed"]


def test_epsilon_equal_to_claim_passes(metrics: dict[str, Any]) -> None:
    metrics["audit"]["dp_sgd"]["lidp"]["eps_lower_bound"] = 1.0
    assert run(metrics)["defenders"]["dp_sgd"]["passed"]


def test_non_dp_defender_has_no_epsilon_check(metrics: dict[str, Any]) -> None:
    """logreg claims no ε: its huge ε̂ is reported, not gated (privacy catches it)."""
    gate = run(metrics, min_privacy=0.0)
    assert gate["defenders"]["logreg"]["passed"], gate["defenders"]["logreg"]["reasons"]


def test_dp_claim_without_audit_results_fails(metrics: dict[str, Any]) -> None:
    metrics["audit"]["dp_sgd"] = {"claimed_epsilon": 1.0, "game3": None}
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "claimed ε = 1 but no audited ε lower bound" in reason
    assert "gate.max_epsilon_excess" in reason


def test_defender_missing_from_audit_fails(metrics: dict[str, Any]) -> None:
    del metrics["audit"]["dp_sgd"]
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert reason.startswith("dp_sgd: no entry in metrics/audit.json")


# --------------------------------------------------------------------------- theory violations


def test_theory_violation_fails_and_names_the_bound(metrics: dict[str, Any]) -> None:
    # issue 13: the theory check needs z >= 2 standard errors (Bonferroni over the attackers), not 1
    metrics["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.82
    reasons = reasons_of(run(metrics), "dp_sgd")
    kinds = {
        k
        for k in ("thudi", "sablayrolles", "izzo", "erlingsson", "yeom")
        if any(f"bound {k} =" in r for r in reasons)
    }
    assert kinds == {
        "thudi",
        "sablayrolles",
        "izzo",
    }  # 0.82 - 2 x 0.0272 = 0.766 > 0.731, 0.75, 0.731; not 0.816, 1.0
    assert all("gate.fail_on_theory_violation" in r and "claimed ε = 1" in r for r in reasons)
    assert run(metrics, fail_on_theory_violation=False)["defenders"]["dp_sgd"]["passed"]


def test_theory_violation_within_error_bar_is_not_a_bug(metrics: dict[str, Any]) -> None:
    """0.745 > Thudi 0.731 but 0.745 - sqrt(.745*.255/200) = 0.714 is not beyond it."""
    metrics["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.745
    assert run(metrics)["defenders"]["dp_sgd"]["passed"]
    reasons = reasons_of(run(metrics, use_error_bars=False), "dp_sgd")
    assert {r.split("bound ")[1].split(" =")[0] for r in reasons} == {"thudi", "izzo"}


def test_theory_violation_by_one_stderr_is_not_a_bug(metrics: dict[str, Any]) -> None:
    """0.80 - 0.028 > Sablayrolles 0.75 (one s.e.), but 0.80 - 2 x 0.028 < 0.75: no flag for it."""
    metrics["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.80
    reasons = reasons_of(run(metrics), "dp_sgd")
    assert not any("bound sablayrolles =" in r for r in reasons)
    assert any("bound thudi =" in r and "- 2 x" in r for r in reasons)


def test_theory_z_grows_with_attackers_and_budget_share(metrics: dict[str, Any]) -> None:
    """More attackers looked at, or a smaller share of gate.beta, need a larger margin."""
    from privaudit.verdict.theory import theory_z

    assert theory_z(5, level=0.01) > theory_z(1, level=0.01) > theory_z(1, level=0.05) >= 2.0
    metrics["audit"]["dp_sgd"]["budget"] = {"beta": 0.05, "gated": ["lidp", "theory"], "diagnostic": [],
                                            "levels": {"lidp": 0.025, "theory": 1e-6}}
    metrics["bounds"]["dp_sgd"]["empirical_accuracy"] = 0.82  # flagged at z = 2, not at z ~ 5
    assert run(metrics)["defenders"]["dp_sgd"]["passed"]


def test_izzo_bound_is_half_plus_eta(metrics: dict[str, Any]) -> None:
    b = metrics["bounds"]["dp_sgd"]
    b.update(
        thudi=None,
        yeom=None,
        erlingsson=None,
        sablayrolles=None,
        mip_eta=0.1,
        empirical_accuracy=0.61,
    )
    (reason,) = reasons_of(run(metrics, use_error_bars=False), "dp_sgd")
    assert "bound izzo = 0.6 " in reason
    b["empirical_accuracy"] = 0.6
    assert run(metrics, use_error_bars=False)["defenders"]["dp_sgd"]["passed"]


def test_dp_claim_without_bounds(metrics: dict[str, Any]) -> None:
    del metrics["bounds"]["dp_sgd"]
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "no entry in metrics/bounds.json" in reason and "gate.fail_on_theory_violation" in reason
    assert run(metrics, fail_on_theory_violation=False)["defenders"]["dp_sgd"]["passed"]


def test_dp_claim_with_null_bounds(metrics: dict[str, Any]) -> None:
    metrics["bounds"]["dp_sgd"].update(
        thudi=None, yeom=None, erlingsson=None, sablayrolles=None, mip_eta=None
    )
    (reason,) = reasons_of(run(metrics), "dp_sgd")
    assert "no finite theoretical bound" in reason


def test_a_claim_with_no_gated_bound_says_why(metrics: dict[str, Any]) -> None:
    """``gate.bounds: []``: NOT AUDITED, and the reason says no bound is gated and which ones the audits computed
    (the walkthrough saw ``…(1, 1e-05, add_remove):  [NOT AUDITED]``, an empty fragment)."""
    metrics["audit"]["dp_sgd"]["budget"] = {"beta": 0.05, "gated": [], "diagnostic": [], "levels": {}}
    verdict = run(metrics)
    assert not verdict["defenders"]["dp_sgd"]["passed"]
    (reason,) = [r for r in reasons_of(verdict, "dp_sgd") if "comparable" in r]
    assert "):  [NOT AUDITED]" not in reason
    assert "gate.bounds gates no ε lower bound (it gates nothing; the audits computed " in reason, reason
    metrics["audit"]["dp_sgd"]["budget"]["gated"] = ["theory"]  # the MI-accuracy check only: named as gated
    (reason,) = [r for r in reasons_of(run(metrics), "dp_sgd") if "comparable" in r]
    assert "gate.bounds gates no ε lower bound (it gates theory; the audits computed " in reason, reason
    assert reason.endswith(") [NOT AUDITED]"), reason


# --------------------------------------------------------------------------- missing and corrupt


def test_defender_without_ltu_result_fails_without_keyerror(metrics: dict[str, Any]) -> None:
    del metrics["ltu"]["dp_sgd"]
    gate = run(metrics)
    (reason,) = reasons_of(gate, "dp_sgd")
    assert reason.startswith("dp_sgd: no LTU result in metrics/ltu.json")
    assert "gate.min_privacy" in reason and "gate.min_utility" in reason
    assert gate["passed"] is False


def test_no_defenders_at_all_fails() -> None:
    gate = evaluate_gate(AuditMetrics(), GateParams()).to_json()
    assert gate == {
        "passed": False,
        "reasons": [
            "no defender found in metrics/ltu.json, metrics/audit.json or metrics/bounds.json"
        ],
        "defenders": {},
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m: m["ltu"]["dp_sgd"].update(privacy="high"), "ltu.dp_sgd.privacy"),
        (lambda m: m["ltu"].update(dp_sgd=[0.9]), "ltu.dp_sgd"),
        (
            lambda m: m["audit"]["dp_sgd"].update(claimed_epsilon="1"),
            "audit.dp_sgd.claimed_epsilon",
        ),
        (
            lambda m: m["audit"]["dp_sgd"]["lidp"].update(eps_lower_bound=True),
            "audit.dp_sgd.lidp.eps_lower_bound",
        ),
        (lambda m: m["bounds"]["dp_sgd"].update(thudi="0.7"), "bounds.dp_sgd.thudi"),
        (lambda m: m["ltu"]["dp_sgd"].update(attackers=[1, 2]), "ltu.dp_sgd.attackers"),
    ],
)
def test_wrong_types_raise_value_error_naming_the_key(
    metrics: dict[str, Any], mutate: Any, message: str
) -> None:
    mutate(metrics)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        run(metrics)


def test_top_level_not_an_object() -> None:
    with pytest.raises(ValueError, match="ltu metrics must be an object"):
        AuditMetrics.parse([], {}, {})


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"passed": "yes", "reasons": [], "defenders": {}}, "gate.passed"),
        ({"passed": True, "reasons": "none", "defenders": {}}, "gate.reasons"),
        ({"passed": True, "reasons": []}, "gate.defenders"),
        (
            {"passed": True, "reasons": [], "defenders": {"a": {"passed": 1, "reasons": []}}},
            "gate.defenders.a.passed",
        ),
    ],
)
def test_parse_gate_rejects_bad_shapes(gate: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        parse_gate(gate)


# --------------------------------------------------------------------------- warnings (never a failure)


def without_logreg(m: dict[str, Any]) -> dict[str, Any]:
    """``m`` without the non-DP ``logreg`` (which fails on LTU privacy), so that the gate can pass."""
    for kind in ("ltu", "audit", "bounds"):
        del m[kind]["logreg"]
    return m


def test_gdp_warning_is_listed_and_the_gate_still_passes(metrics: dict[str, Any]) -> None:
    m = without_logreg(synthetic.with_blackbox(metrics))
    gate = run(m)
    assert gate["passed"] is True
    assert gate["defenders"]["dp_bare"] == {"passed": True, "reasons": []}
    assert gate["warnings"] == [f"defender dp_bare: {synthetic.GDP_WARNING}"]
    assert list(gate) == ["passed", "reasons", "defenders", "warnings"]
    assert parse_gate(json.loads(json.dumps(gate))).to_json() == gate


def test_a_warning_changes_no_verdict(metrics: dict[str, Any]) -> None:
    with_warning = run(synthetic.with_blackbox(copy.deepcopy(metrics)))
    metrics = synthetic.with_blackbox(metrics)
    metrics["audit"]["dp_bare"]["blackbox"]["gdp_warning"] = None
    without = run(metrics)
    assert with_warning["passed"] is without["passed"] is False  # logreg fails on LTU privacy either way
    assert {k: v for k, v in with_warning.items() if k != "warnings"} == without
    assert len(with_warning["warnings"]) == 1


def test_no_warning_writes_no_warnings_key(metrics: dict[str, Any]) -> None:
    m = without_logreg(synthetic.with_blackbox(metrics))
    m["audit"]["dp_bare"]["blackbox"]["gdp_warning"] = None
    result = synthetic.gate_of(m)
    assert result.passed is True and result.warnings == ()
    assert "warnings" not in result.to_json()  # the older shape, byte for byte
    assert parse_gate({"passed": True, "reasons": [], "defenders": {}}).warnings == ()


def test_a_mip_eta_claim_is_checked_by_the_theory_bound() -> None:
    """Issue 34: an η-MIP defender's claim (1/2 + η on any attacker's accuracy) was never checked (mip_eta null)."""
    from privaudit.verdict.theory import compute_bounds
    from privaudit.verdict.metrics_files import parse_entries

    ltu = parse_entries("ltu", {"mip": synthetic.defender_ltu(0.62, 0.70, 0.9)})  # accuracy 0.70 over 1000 rounds
    bounds = compute_bounds({"mip": None}, ltu, 0.5, levels={"mip": 0.01}, mip_etas={"mip": 0.1})
    row = bounds["mip"]
    assert row["mip_eta"] == 0.1 and row["comparable"] is True and row["exceeds_theory"] is True  # 0.70 > 0.6
    honest = compute_bounds({"mip": None}, ltu, 0.5, levels={"mip": 0.01}, mip_etas={"mip": 0.3})["mip"]
    assert honest["exceeds_theory"] is False
    none = compute_bounds({"mip": None}, ltu, 0.5, levels={"mip": 0.01})["mip"]
    assert none["mip_eta"] is None and none["exceeds_theory"] is False


def test_gate_fails_a_mip_recipe_above_its_eta_bound(metrics: dict) -> None:
    from privaudit.verdict.theory import compute_bounds
    from privaudit.verdict.metrics_files import parse_entries

    metrics["ltu"]["mip"] = synthetic.defender_ltu(0.62, 0.70, 0.9)
    metrics["audit"]["mip"] = {"claimed_epsilon": None}
    metrics["bounds"]["mip"] = compute_bounds({"mip": None}, parse_entries("ltu", {"mip": metrics["ltu"]["mip"]}),
                                              0.5, levels={"mip": 0.01}, mip_etas={"mip": 0.1})["mip"]
    gate = synthetic.gate_of(metrics, min_privacy=0.0)
    reasons = gate.defenders["mip"].reasons
    assert any("izzo" in r and "claimed MIP η = 0.1" in r for r in reasons), reasons
