from __future__ import annotations

import math

import pytest

from privaudit.bounds import compute_bounds, defender_bounds


def test_no_claim_gives_no_bounds() -> None:
    row = defender_bounds(None, None, {"accuracy": 0.6, "privacy_stderr": 0.02}, 0.5)
    assert row["thudi"] is None and row["mip_eta"] is None and row["empirical_accuracy"] == 0.6
    assert row["exceeds_theory"] is False


def test_thudi_golden_and_flag() -> None:
    # Thudi §5.1: at eps = 1, p = 1/2 the bound is e/(1+e) = 73.1 %; Erlingsson 81.6 %; Sablayrolles 75 %
    row = defender_bounds(1.0, 0.0, {"accuracy": 0.70, "privacy_stderr": 0.02}, 0.5)
    assert row["thudi"] == pytest.approx(math.e / (1 + math.e))
    assert row["erlingsson"] == pytest.approx(1 - math.exp(-1) / 2)
    assert row["sablayrolles"] == pytest.approx(0.75)
    assert row["exceeds_theory"] is False
    # clearly above the bound, beyond two standard errors → flagged
    assert defender_bounds(1.0, 0.0, {"accuracy": 0.80, "privacy_stderr": 0.02}, 0.5)["exceeds_theory"] is True
    # within two standard errors → not flagged
    assert defender_bounds(1.0, 0.0, {"accuracy": 0.75, "privacy_stderr": 0.04}, 0.5)["exceeds_theory"] is False


def test_delta_loosens_only_where_it_should() -> None:
    pure = defender_bounds(1.0, 0.0, None, 0.5)
    approx = defender_bounds(1.0, 1e-3, None, 0.5)
    assert approx["thudi"] == pure["thudi"] and approx["erlingsson"] > pure["erlingsson"]
    # the flag allows delta on top of the Thudi bound
    edge = pure["thudi"] + 0.0005
    assert defender_bounds(1.0, 1e-3, {"accuracy": edge, "privacy_stderr": 0.0}, 0.5)["exceeds_theory"] is False
    assert defender_bounds(1.0, 0.0, {"accuracy": edge, "privacy_stderr": 0.0}, 0.5)["exceeds_theory"] is True


def test_unbalanced_prior_uses_thudi_at_p() -> None:
    row = defender_bounds(2.0, 0.0, None, 0.01)
    assert row["thudi"] == pytest.approx(1 / (1 + math.exp(-2) * 99))  # Thudi §4.1: ≈ 6.9 %
    assert row["yeom"] == pytest.approx(min(1.0, math.exp(2) / 2))


def test_compute_bounds_covers_every_defender() -> None:
    infos = {"b": {"claimed_epsilon": 1.0, "claimed_delta": 1e-5}, "a": {"claimed_epsilon": None}}
    out = compute_bounds(infos, {"a": {"accuracy": 0.9, "privacy_stderr": 0.01}}, 0.5)
    assert list(out) == ["a", "b"] and out["b"]["empirical_accuracy"] is None
