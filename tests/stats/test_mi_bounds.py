"""Golden numbers from Thudi et al. 2022 (§4.1, §5.1, Table 1, Corollary 1, §6)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.stats import (
    deletion_capacity,
    mi_accuracy_bound,
    mi_accuracy_lower_bound,
    mi_negative_accuracy_bounds,
    mi_positive_advantage_bound,
    subsampled_mi_accuracy_bound,
)


def test_section_5_1_eps1() -> None:
    assert mi_accuracy_bound(1.0) == pytest.approx(0.731, abs=5e-4)
    assert mi_accuracy_bound(1.0, kind="erlingsson") == pytest.approx(0.816, abs=5e-4)
    assert mi_accuracy_bound(1.0, kind="sablayrolles") == pytest.approx(0.75)


def test_section_5_1_eps2() -> None:
    assert mi_accuracy_bound(2.0) == pytest.approx(0.88, abs=5e-3)
    assert mi_accuracy_bound(2.0, kind="sablayrolles") == pytest.approx(1.0)
    # The paper prints 95% for Erlingsson at eps=2; the formula 1 - e^{-2}/2 gives 93.2%.
    assert mi_accuracy_bound(2.0, kind="erlingsson") == pytest.approx(1 - math.exp(-2) / 2)
    assert mi_accuracy_bound(2.0, kind="erlingsson") == pytest.approx(0.932, abs=5e-4)


def test_section_4_1_subsampling() -> None:
    assert subsampled_mi_accuracy_bound(2.0, 0.01) == pytest.approx(0.069, abs=1e-3)
    assert mi_accuracy_bound(2.0, p_member=0.01) == pytest.approx(subsampled_mi_accuracy_bound(2.0, 0.01))
    # amplification: a smaller rate gives a smaller bound
    assert subsampled_mi_accuracy_bound(2.0, 0.001) < subsampled_mi_accuracy_bound(2.0, 0.01)


def test_yeom_and_erlingsson_delta() -> None:
    assert mi_accuracy_bound(0.5, kind="yeom") == pytest.approx(math.exp(0.5) / 2)
    assert mi_accuracy_bound(1.0, kind="yeom") == 1.0  # e/2 > 1, capped
    d = 1e-3
    adv = 1 - math.exp(-1.0) + d * math.exp(-1.0)
    assert mi_accuracy_bound(1.0, kind="erlingsson", delta=d) == pytest.approx(0.5 + adv / 2)


def test_delta_rejected_for_pure_dp_bounds() -> None:
    with pytest.raises(ValueError, match="delta"):
        mi_accuracy_bound(1.0, kind="thudi", delta=1e-5)
    with pytest.raises(ValueError, match="p_member"):
        mi_accuracy_bound(1.0, p_member=0.3, kind="yeom")
    with pytest.raises(ValueError, match="kind"):
        mi_accuracy_bound(1.0, kind="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        mi_accuracy_bound(-1.0)


@given(eps=st.floats(0, 20), p=st.floats(0.001, 0.999))
@settings(max_examples=100, deadline=None)
def test_theorem1_and_corollary1_consistency(eps: float, p: float) -> None:
    up = mi_accuracy_bound(eps, p)
    lo = mi_accuracy_lower_bound(eps, p)
    assert lo <= p + 1e-12 <= up + 2e-12
    n_lo, n_up = mi_negative_accuracy_bounds(eps, p)
    assert n_lo == pytest.approx(1 - up) and n_up == pytest.approx(1 - lo)
    # Thudi is tighter than Erlingsson and Sablayrolles at p = 1/2 (Figure 2)
    if eps > 0:
        assert mi_accuracy_bound(eps) <= mi_accuracy_bound(eps, kind="erlingsson") + 1e-12
        assert mi_accuracy_bound(eps) <= mi_accuracy_bound(eps, kind="sablayrolles") + 1e-12


def test_advantage_eq5() -> None:
    assert mi_positive_advantage_bound(1.0, 0.5) == pytest.approx(2 * (mi_accuracy_bound(1.0) - 0.5))


def test_deletion_capacity_uses_valid_lower_bound() -> None:
    eps, p, b = 1.0, 100 / 10000, 0.8
    valid_l = 1 / (1 + math.exp(eps) * p / (1 - p))
    misprinted_l = 1 / (1 + math.exp(-eps) * p / (1 - p))
    assert deletion_capacity(eps, p, b) == math.floor(math.log(b) / math.log(valid_l))
    assert deletion_capacity(eps, p, b) < math.floor(math.log(b) / math.log(misprinted_l))
    # the capacity is safe: L^m >= B
    m = deletion_capacity(eps, p, b)
    assert valid_l**m >= b and valid_l ** (m + 1) < b
    assert deletion_capacity(eps, p, 1.0) == 0
    with pytest.raises(ValueError, match="b"):
        deletion_capacity(eps, p, 0.0)
