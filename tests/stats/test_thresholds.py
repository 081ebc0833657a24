"""Honest threshold selection: split certification and Bonferroni correction."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.stats import (
    bonferroni_max,
    certify_bonferroni,
    certify_selected,
    certify_split,
    lidp_epsilon_lower_bound,
    select_threshold,
)
from privaudit.stats.thresholds import _epsilon_curve

GRID = np.linspace(-2.0, 4.0, 25)


def _scores(rng: np.random.Generator, n: int, k: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(shift, 1.0, (n, k)), rng.normal(0.0, 1.0, (n, k))


def test_curve_matches_lidp_bound_at_each_threshold() -> None:
    sx, sy = _scores(np.random.default_rng(0), 150, 6, 1.5)
    curve = _epsilon_curve(sx, sy, GRID, 1e-5, 0.05, 2, "wilson")
    for tau, eps in zip(GRID, curve):
        assert eps == pytest.approx(lidp_epsilon_lower_bound(sx >= tau, sy >= tau, 1e-5, level=0.05), abs=1e-12)


def test_selection_carries_no_bound_and_refuses_reuse() -> None:
    rng = np.random.default_rng(1)
    sx, sy = _scores(rng, 200, 4, 1.5)
    sel = select_threshold(sx, sy, GRID, 1e-5, level=0.05)
    assert not hasattr(sel, "epsilon_lower_bound")
    with pytest.raises(ValueError, match="reuse 200 trial"):
        certify_selected(sel, sx, sy, 1e-5, level=0.05)
    with pytest.raises(ValueError, match="reuse 1 trial"):  # even a single reused trial
        fx, fy = _scores(rng, 50, 4, 1.5)
        certify_selected(sel, np.vstack([fx, sx[:1]]), np.vstack([fy, sy[:1]]), 1e-5, level=0.05)
    fx, fy = _scores(rng, 200, 4, 1.5)
    cert = certify_selected(sel, fx, fy, 1e-5, level=0.05)
    assert cert.epsilon_lower_bound == pytest.approx(lidp_epsilon_lower_bound(fx >= sel.threshold, fy >= sel.threshold, 1e-5, level=0.05))


def test_split_uses_disjoint_halves() -> None:
    rng = np.random.default_rng(2)
    sx, sy = _scores(rng, 301, 4, 1.5)
    cert = certify_split(sx, sy, GRID, 1e-5, rng, tune_fraction=0.3, level=0.05)
    assert (cert.n_tune, cert.n_certify) == (90, 211)
    assert cert.strategy == "split" and cert.n_candidates == GRID.size
    with pytest.raises(ValueError, match="one row per trial"):
        certify_split(sx, sy[:10], GRID, 1e-5, rng, level=0.05)


def test_bonferroni_is_max_at_corrected_level() -> None:
    sx, sy = _scores(np.random.default_rng(3), 300, 4, 1.5)
    cert = certify_bonferroni(sx, sy, GRID, 1e-5, level=0.05)
    corrected = _epsilon_curve(sx, sy, GRID, 1e-5, 0.05 / GRID.size, 2, "wilson")
    assert cert.epsilon_lower_bound == pytest.approx(corrected.max())
    naive = _epsilon_curve(sx, sy, GRID, 1e-5, 0.05, 2, "wilson").max()
    assert cert.epsilon_lower_bound < naive  # the correction costs something


def test_multiplicity_inflates_naive_max_but_not_honest_strategies() -> None:
    """Null model (no leakage, true eps = 0).  Picking the best of 40 thresholds on the same data
    multiplies the rate of spurious eps_hat > 0 many times over a single fixed tau; Bonferroni and
    split certification stay below level.  (The LiDP bound combines two one-sided bounds, so even
    the naive rate stays under level here; the inflation is what the test checks.)"""
    rng = np.random.default_rng(4)
    grid = np.linspace(-1.0, 2.5, 40)
    reps, level = 150, 0.2
    single = naive = bonf = split = 0
    for _ in range(reps):
        sx, sy = rng.normal(0, 1, (100, 1)), rng.normal(0, 1, (100, 400))
        curve = _epsilon_curve(sx, sy, grid, 0.0, level, 2, "wilson")
        single += curve[20] > 0
        naive += curve.max() > 0
        bonf += certify_bonferroni(sx, sy, grid, 0.0, level=level).epsilon_lower_bound > 0
        split += certify_split(sx, sy, grid, 0.0, rng, level=level).epsilon_lower_bound > 0
    print(f"P(eps_hat > 0 | eps = 0): fixed tau {single / reps:.3f}, naive max {naive / reps:.3f}, "
          f"bonferroni {bonf / reps:.3f}, split {split / reps:.3f}")
    assert bonf / reps <= level and split / reps <= level
    assert naive >= 3 * max(single, 1)
    assert naive > bonf


def test_bonferroni_max_generic() -> None:
    val, arg = bonferroni_max(lambda c, b: c - b, [0.1, 0.5, 0.2], level=0.3)
    assert (val, arg) == (pytest.approx(0.4), 0.5)
    with pytest.raises(ValueError, match="candidates"):
        bonferroni_max(lambda c, b: c, [], level=0.1)
    with pytest.raises(ValueError, match="level"):
        bonferroni_max(lambda c, b: c, [0.1], level=1.5)


def test_validation() -> None:
    sx, sy = _scores(np.random.default_rng(5), 20, 2, 1.0)
    with pytest.raises(ValueError, match="thresholds"):
        select_threshold(sx, sy, [], 1e-5, level=0.05)
    with pytest.raises(ValueError, match="scores_x"):
        select_threshold(sx[:, 0], sy, GRID, 1e-5, level=0.05)
    with pytest.raises(ValueError, match="tune_fraction"):
        certify_split(sx, sy, GRID, 1e-5, np.random.default_rng(0), tune_fraction=1.0, level=0.05)
