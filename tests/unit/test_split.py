from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.data.split import stratified_split
from privaudit.validation import ValidationFailed, validate_membership


def _data(n_per_class: int = 20, n_classes: int = 4):
    y = np.repeat(np.arange(n_classes), n_per_class)
    ids = np.array([f"s{i:04d}" for i in range(len(y))])
    return ids, y


def test_split_is_stratified_disjoint_and_seeded() -> None:
    ids, y = _data()
    a = stratified_split(ids, y, 0.5, np.random.default_rng(1))
    b = stratified_split(ids, y, 0.5, np.random.default_rng(1))
    c = stratified_split(ids, y, 0.5, np.random.default_rng(2))
    pd.testing.assert_frame_equal(a, b)
    assert not a["role"].equals(c["role"])
    assert a["id"].is_unique and len(a) == len(ids)
    per_class = a.groupby("label")["role"].apply(lambda r: (r == "defender").mean())
    assert np.allclose(per_class, 0.5)
    validate_membership(a, 4, 0.5, 0.02)


@settings(max_examples=25, deadline=None)
@given(frac=st.floats(0.2, 0.8), n_per_class=st.integers(5, 30), n_classes=st.integers(2, 6), seed=st.integers(0, 10**6))
def test_split_fraction_property(frac: float, n_per_class: int, n_classes: int, seed: int) -> None:
    ids, y = _data(n_per_class, n_classes)
    m = stratified_split(ids, y, frac, np.random.default_rng(seed))
    share = (m["role"] == "defender").mean()
    assert abs(share - frac) <= 0.5 / len(y) + 1e-12
    for role in ("defender", "reserved"):
        assert set(m.loc[m["role"] == role, "label"]) == set(range(n_classes))


def test_split_rejects_bad_input() -> None:
    ids, y = _data()
    with pytest.raises(ValueError, match="split.defender_fraction"):
        stratified_split(ids, y, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="class 9 has 1"):
        stratified_split(np.append(ids, "x"), np.append(y, 9), 0.5, np.random.default_rng(0))


def test_split_suite_names_the_failed_expectation() -> None:
    ids, y = _data()
    m = stratified_split(ids, y, 0.5, np.random.default_rng(0))
    overlap = pd.concat([m, m.iloc[[0]].assign(role="reserved")], ignore_index=True)
    with pytest.raises(ValidationFailed, match="expect_column_values_to_be_unique") as err:
        validate_membership(overlap, 4, 0.5, 0.02)
    assert "split/membership" in str(err.value) and m.iloc[0]["id"] in str(err.value)
    missing_class = m[~((m["label"] == 3) & (m["role"] == "reserved"))]
    with pytest.raises(ValidationFailed, match="reserved.*expect_column_distinct_values_to_contain_set"):
        validate_membership(missing_class, 4, 0.5, 0.2)
    with pytest.raises(ValidationFailed, match="expect_column_mean_to_be_between"):
        validate_membership(m, 4, 0.8, 0.02)
