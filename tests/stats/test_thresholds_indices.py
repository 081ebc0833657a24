"""Issue 13: reuse of tuning trials is checked by trial index, not by the trials' scores."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.stats import certify_selected, certify_split, lidp_epsilon_lower_bound, select_threshold

GRID = np.linspace(-2.0, 4.0, 25)


def _capped(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores of a trainer whose (negated) losses are capped: most trials have identical rows."""
    sx = np.minimum(rng.normal(2.0, 1.0, (n, 4)), 1.0)
    sy = np.minimum(rng.normal(0.0, 1.0, (n, 4)), 1.0)
    sx[::2] = 1.0  # every other trial: all losses at the cap
    sy[::2] = 1.0
    return sx, sy


def test_equal_score_distinct_trials_certify_fine() -> None:
    rng = np.random.default_rng(0)
    sx, sy = _capped(rng, 200)
    sel = select_threshold(sx[:100], sy[:100], GRID, 1e-5, level=0.05, trial_indices=np.arange(100))
    assert sel.tuning_indices == frozenset(range(100)) and sel.tuning_trials == 100
    # trials 100..199 have exactly the same rows as some tuning trials, but are other trials
    assert {np.r_[a, b].tobytes() for a, b in zip(sx[100:], sy[100:])} & {np.r_[a, b].tobytes() for a, b in zip(sx[:100], sy[:100])}
    cert = certify_selected(sel, sx[100:], sy[100:], 1e-5, level=0.05, trial_indices=np.arange(100, 200))
    expect = lidp_epsilon_lower_bound(sx[100:] >= sel.threshold, sy[100:] >= sel.threshold, 1e-5, level=0.05)
    assert cert.epsilon_lower_bound == pytest.approx(expect) and cert.n_certify == 100
    # the random split uses indices, so capped scores no longer look like reused trials
    c = certify_split(sx, sy, GRID, 1e-5, np.random.default_rng(1), level=0.05)
    assert (c.n_tune, c.n_certify) == (100, 100)
    # without indices the content check cannot tell these trials apart (and says what to do)
    sel_h = select_threshold(sx[:100], sy[:100], GRID, 1e-5, level=0.05)
    with pytest.raises(ValueError, match="pass trial_indices"):
        certify_selected(sel_h, sx[100:], sy[100:], 1e-5, level=0.05)


def test_overlapping_indices_are_refused_with_params_keys() -> None:
    rng = np.random.default_rng(2)
    sx, sy = rng.normal(2, 1, (60, 4)), rng.normal(0, 1, (60, 4))
    sel = select_threshold(sx[:30], sy[:30], GRID, 1e-5, level=0.05, trial_indices=np.arange(30))
    idx = np.r_[np.arange(30, 58), 3, 17]  # two tuning trials sneak in (any scores)
    fx, fy = rng.normal(2, 1, (30, 4)), rng.normal(0, 1, (30, 4))
    with pytest.raises(ValueError, match=r"reuse 2 trial\(s\).*\[3, 17\]") as err:
        certify_selected(sel, fx, fy, 1e-5, level=0.05, trial_indices=idx)
    msg = str(err.value)
    assert "lidp.tune_fraction" in msg and "lidp.tau_selection" in msg
    assert "certify_bonferroni" not in msg and "certify_selected" not in msg
    with pytest.raises(ValueError, match="pass trial_indices"):
        certify_selected(sel, fx, fy, 1e-5, level=0.05)  # the selection has indices: the check needs them too


@pytest.mark.parametrize(
    "idx,match", [(np.arange(5), "one index per trial"), (np.zeros(30, int), "distinct"),
                  (np.linspace(0, 1, 30), "integers")],
)
def test_trial_indices_validation(idx: np.ndarray, match: str) -> None:
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match=match):
        select_threshold(rng.normal(size=(30, 2)), rng.normal(size=(30, 2)), GRID, 1e-5, level=0.05,
                         trial_indices=idx)
