"""The identity backbone: deterministic per-column z-scores, constant columns at 0."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.data.sources import SourceData, load_source
from privaudit.features import featurize
from privaudit.features.identity import standardize


def _table(X: np.ndarray) -> SourceData:
    n = X.shape[0]
    return SourceData(
        X=X.astype(np.float32), y=np.zeros(n, dtype=np.int64), ids=np.array([f"r{i}" for i in range(n)]),
        meta={"name": "t", "n_classes": 1, "class_names": ["0"], "modality": "tabular",
              "image_shape": None, "origin": "test"},
    )


def test_standardizes_and_zeroes_constant_columns() -> None:
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(5, 3, 200), np.full(200, 0.1), rng.integers(0, 2, 200), np.zeros(200)])
    Z = featurize(_table(X), "identity")
    assert Z.shape == (200, 4) and Z.dtype == np.float32
    np.testing.assert_allclose(Z[:, [0, 2]].mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(Z[:, [0, 2]].std(axis=0), 1.0, atol=1e-5)
    assert np.all(Z[:, 1] == 0.0) and np.all(Z[:, 3] == 0.0)
    expected = (X[:, 0] - X[:, 0].mean()) / X[:, 0].astype(np.float32).astype(np.float64).std()
    np.testing.assert_allclose(Z[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_deterministic_bit_for_bit() -> None:
    data = load_source("digits")
    a = featurize(data, "identity")
    b = featurize(data, "identity")
    assert a.tobytes() == b.tobytes()
    assert a.shape == (1797, 64) and np.isfinite(a).all()
    constant = np.ptp(data.X.reshape(1797, -1), axis=0) == 0
    assert constant.any() and np.all(a[:, constant] == 0.0)


def test_images_are_flattened_in_c_order() -> None:
    data = load_source("digits", max_samples=30, rng=np.random.default_rng(0))
    Z = featurize(data, "identity")
    flat = data.X.reshape(30, -1)
    j = int(np.argmax(flat.std(axis=0)))
    np.testing.assert_allclose(Z[:, j], (flat[:, j] - flat[:, j].mean()) / flat[:, j].std(), rtol=1e-4, atol=1e-5)


def test_non_finite_and_unknown_backbone() -> None:
    X = np.ones((3, 2))
    X[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        standardize(X)
    with pytest.raises(ValueError, match=r"featurize\.backbone.*'pixels'"):
        featurize(_table(np.ones((3, 2))), "pixels")


def test_tabular_with_pretrained_backbone_is_refused() -> None:
    with pytest.raises(ValueError, match=r"featurize\.backbone='efficientnet_lite0'.*tabular"):
        featurize(_table(np.ones((3, 2))), "efficientnet_lite0")
    with pytest.raises(ValueError, match=r"featurize\.backbone='torchvision:resnet18'"):
        featurize(_table(np.ones((3, 2))), "torchvision:resnet18")


def test_constant_column_with_inexact_mean_is_exactly_zero() -> None:
    # mean(0.7 × 7) != 0.7 in float64 and its std is ~1e-16, not 0: a tolerance-free
    # std == 0 test would blow rounding noise up to ±1.
    X = np.column_stack([np.full(7, 0.7), np.arange(7.0)])
    assert np.full(7, 0.7).std() > 0
    Z = standardize(X)
    assert np.all(Z[:, 0] == 0.0)
    np.testing.assert_allclose(Z[:, 1], (np.arange(7) - 3) / 2, rtol=1e-6)


# --- nothing of the feature map is fitted on rows under audit (issue 27, item 4) -------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), row=st.integers(0, 19), shift=st.floats(-1e3, 1e3, allow_nan=False))
def test_a_defender_row_changes_no_other_row(seed: int, row: int, shift: float) -> None:
    """Changing one Defender row (not in ``fit_rows``) changes that row's features only."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 5))
    fit = np.zeros(40, dtype=bool)
    fit[20:] = True  # rows 0..19 are under audit
    Y = X.copy()
    Y[row] += shift
    a, b = standardize(X, fit), standardize(Y, fit)
    others = np.arange(40) != row
    assert a[others].tobytes() == b[others].tobytes()


def test_statistics_come_from_fit_rows_only() -> None:
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.normal(3, 2, 60), rng.normal(-1, 5, 60)])
    fit = rng.random(60) < 0.5
    Z = standardize(X, fit)
    np.testing.assert_allclose(Z[fit].mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(Z[fit].std(axis=0), 1.0, atol=1e-5)
    expected = (X - X[fit].mean(axis=0)) / X[fit].std(axis=0)
    np.testing.assert_allclose(Z, expected, rtol=1e-5, atol=1e-5)
    # the all-rows fit is a different map: the planted leak the mask removes
    assert not np.allclose(standardize(X), Z)


def test_column_constant_on_fit_rows_is_zero_everywhere() -> None:
    X = np.column_stack([np.r_[np.zeros(5), np.arange(5.0)], np.arange(10.0)])
    fit = np.r_[np.ones(5, dtype=bool), np.zeros(5, dtype=bool)]
    Z = standardize(X, fit)
    assert np.all(Z[:, 0] == 0.0)  # varies only on the rows under audit: carries nothing


def test_bad_fit_rows_are_refused() -> None:
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"fit_rows must be a boolean mask of shape \(4,\)"):
        standardize(X, np.array([0, 1]))
    with pytest.raises(ValueError, match="no Reserved row.*split.defender_fraction"):
        standardize(X, np.zeros(4, dtype=bool))


def test_featurize_passes_fit_rows_to_identity() -> None:
    data = load_source("digits", max_samples=50, rng=np.random.default_rng(1))
    fit = np.arange(50) % 2 == 0
    np.testing.assert_array_equal(featurize(data, "identity", fit_rows=fit), standardize(data.X, fit))
