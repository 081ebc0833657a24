"""nanpercentile_columns gives numpy.nanpercentile(a, q, axis=0)'s numbers bit for bit, faster."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.stats.percentiles import nanpercentile_columns


def _numpy(a: np.ndarray, q: list[float]) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(a, q, axis=0)


def _ours(a: np.ndarray, q: list[float]) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return nanpercentile_columns(a, q)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 30), nan_share=st.sampled_from([0.0, 0.02, 0.2, 0.7, 1.0]),
       dtype=st.sampled_from([np.float64, np.float32]), ties=st.booleans(),
       q=st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1))
def test_same_bits_as_numpy(rows: int, cols: int, nan_share: float, dtype: type, ties: bool, q: list[float],
                            seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, cols))
    if ties:  # repeated values: the interpolation between equal order statistics
        a = np.round(a)
    a = a.astype(dtype)
    a[rng.random(a.shape) < nan_share] = np.nan
    assert _same_bits(_ours(a, q), _numpy(a, q))


def test_a_float32_table_whose_first_column_is_all_nan_takes_numpys_type() -> None:
    """numpy fills one buffer of its first column's result type: float32 when that column is all NaN, and the other
    columns' float64 percentiles are cast to it (found by the property test above: 1 row, 3 columns)."""
    a = np.array([[np.nan, -0.13210486, 0.64042264]], dtype=np.float32)
    assert _numpy(a, [0.0]).dtype == np.float32 and _same_bits(_ours(a, [0.0]), _numpy(a, [0.0]))
    b = np.array([[1.0, np.nan], [np.nan, np.nan], [3.0, 2.0]], dtype=np.float32)
    assert _same_bits(_ours(b, [10.0, 90.0]), _numpy(b, [10.0, 90.0]))


def test_all_nan_column_warns_as_numpy_does() -> None:
    a = np.array([[1.0, np.nan], [2.0, np.nan], [4.0, np.nan]])
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = nanpercentile_columns(a, [2.5, 97.5])
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        want = np.nanpercentile(a, [2.5, 97.5], axis=0)
    assert _same_bits(got, want) and np.isnan(got[:, 1]).all()
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs] != []


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_empty_tables_are_numpys(shape: tuple[int, int]) -> None:
    a = np.zeros(shape)
    assert _same_bits(_ours(a, [5.0, 95.0]), _numpy(a, [5.0, 95.0]))


@pytest.mark.parametrize("bad, match", [(np.zeros(3), "2-D"), (np.zeros((2, 2, 2)), "2-D")])
def test_refuses_other_shapes(bad: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        nanpercentile_columns(bad, [50.0])


def test_refuses_a_scalar_percentile() -> None:
    with pytest.raises(ValueError, match="list of percentiles"):
        nanpercentile_columns(np.zeros((3, 2)), 50.0)  # type: ignore[arg-type]
