from __future__ import annotations

import math

import pytest

from privaudit.verdict.theory import compute_bounds, defender_bounds
from privaudit.claims.claim import PrivacyClaim
from privaudit.verdict.metrics_files import AttackerResult, LtuEntry


def _claim(eps: float | None, delta: float | None) -> PrivacyClaim | None:
    """A claim about the LTU game's neighbourhood itself (replace one), so the bounds are at eps."""
    return None if eps is None else PrivacyClaim(eps, delta or 0.0, "replace_one")


def _ltu(d: dict | None) -> AttackerResult | None:
    return None if d is None else AttackerResult(**d)


#: the theory check's level: one attacker at 0.05 gives z = max(2, Φ⁻¹(0.95)) = 2 standard errors
LEVEL = 0.05


def test_no_claim_gives_no_bounds() -> None:
    row = defender_bounds(_claim(None, None), _ltu({"accuracy": 0.6, "privacy_stderr": 0.02}), 0.5, level=LEVEL)
    assert row["thudi"] is None and row["mip_eta"] is None and row["empirical_accuracy"] == 0.6
    assert row["exceeds_theory"] is False


def test_thudi_golden_and_flag() -> None:
    # Thudi §5.1: at eps = 1, p = 1/2 the bound is e/(1+e) = 73.1 %; Erlingsson 81.6 %; Sablayrolles 75 %
    row = defender_bounds(_claim(1.0, 0.0), _ltu({"accuracy": 0.70, "privacy_stderr": 0.02}), 0.5, level=LEVEL)
    assert row["thudi"] == pytest.approx(math.e / (1 + math.e))
    assert row["erlingsson"] == pytest.approx(1 - math.exp(-1) / 2)
    assert row["sablayrolles"] == pytest.approx(0.75)
    assert row["exceeds_theory"] is False
    # clearly above the bound, beyond two standard errors → flagged
    assert defender_bounds(_claim(1.0, 0.0), _ltu({"accuracy": 0.80, "privacy_stderr": 0.02}), 0.5, level=LEVEL)["exceeds_theory"] is True
    # within two standard errors → not flagged
    assert defender_bounds(_claim(1.0, 0.0), _ltu({"accuracy": 0.75, "privacy_stderr": 0.04}), 0.5, level=LEVEL)["exceeds_theory"] is False


def test_delta_loosens_only_where_it_should() -> None:
    pure = defender_bounds(_claim(1.0, 0.0), _ltu(None), 0.5, level=LEVEL)
    approx = defender_bounds(_claim(1.0, 1e-3), _ltu(None), 0.5, level=LEVEL)
    assert approx["thudi"] == pure["thudi"] and approx["erlingsson"] > pure["erlingsson"]
    # the flag allows delta on top of the Thudi bound
    edge = pure["thudi"] + 0.0005
    assert defender_bounds(_claim(1.0, 1e-3), _ltu({"accuracy": edge, "privacy_stderr": 0.0}), 0.5, level=LEVEL)["exceeds_theory"] is False
    assert defender_bounds(_claim(1.0, 0.0), _ltu({"accuracy": edge, "privacy_stderr": 0.0}), 0.5, level=LEVEL)["exceeds_theory"] is True


def test_unbalanced_prior_uses_thudi_at_p() -> None:
    row = defender_bounds(_claim(2.0, 0.0), _ltu(None), 0.01, level=LEVEL)
    assert row["thudi"] == pytest.approx(1 / (1 + math.exp(-2) * 99))  # Thudi §4.1: ≈ 6.9 %
    assert row["yeom"] == pytest.approx(min(1.0, math.exp(2) / 2))


def test_compute_bounds_covers_every_defender() -> None:
    claims = {"b": PrivacyClaim(1.0, 1e-5, "add_remove"), "a": None}
    out = compute_bounds(claims, {"a": LtuEntry(accuracy=0.9, privacy_stderr=0.01)}, 0.5,
                         levels={"a": LEVEL, "b": LEVEL})
    assert list(out) == ["a", "b"] and out["b"]["empirical_accuracy"] is None
    assert out["a"]["thudi"] is None and out["a"]["empirical_accuracy"] == 0.9
    # an add/remove claim is compared through group privacy: (2 eps, (1 + e^eps) delta) for replace-one
    assert out["b"]["compared_epsilon"] == 2.0 and out["b"]["delta"] == pytest.approx((1 + math.e) * 1e-5)


def test_a_label_dp_claim_is_not_comparable() -> None:
    row = defender_bounds(PrivacyClaim(1.0, 0.0, "replace_label"), _ltu({"accuracy": 0.99}), 0.5, level=LEVEL)
    assert row["comparable"] is False and row["thudi"] is None and row["exceeds_theory"] is False
