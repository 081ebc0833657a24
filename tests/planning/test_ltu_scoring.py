"""The first plan's LTU scoring probe (privaudit.planning.ltu_scoring): it trains nothing, says what it timed and
what it left out, refuses sizes it cannot time, and its rate model recovers a linear cost exactly."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privaudit.planning.ltu_scoring as ltu_scoring
from privaudit.attacks.ltu_evaluation import AttackerOptions
from privaudit.attacks.sample_risk import RiskOptions
from privaudit.defenders.specs import validate_defender_spec
from privaudit.planning.ltu_scoring import NOT_TIMED, scoring_rate, time_ltu_scoring

SPEC = validate_defender_spec({"name": "logreg", "kind": "logistic_regression"})
OPTS = AttackerOptions(n_jobs=1, reference_models=4)


def test_doctests() -> None:
    assert doctest.testmod(ltu_scoring).failed == 0


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any reference or mock training fails the test: the probe times scoring, never fits."""
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the LTU scoring probe trained a model")

    import privaudit.attacks.batched_mocks as batched_mocks
    import privaudit.attacks.mia_reference as mia_reference
    import privaudit.attacks.sample_risk as sample_risk

    for module, name in ((mia_reference, "train_reference_confidences"), (mia_reference, "train_subset_confidences"),
                         (sample_risk, "train_population_references"), (batched_mocks, "train_mock_heads")):
        monkeypatch.setattr(module, name, boom)


def test_times_the_attackers_and_the_risk_without_training(no_training: None) -> None:
    t = time_ltu_scoring(SPEC, n_defender=60, n_reserved=70, n_classes=3, rounds=200,
                         attackers=["loss_gap", "learned", "gradient", "lira", "rmia", "retrain"], options=OPTS,
                         risk=RiskOptions(reference_models=8, bootstrap=30))
    assert t.seconds > 0
    assert "synthetic 60 + 70 rows x 3 classes" in t.timed_by
    assert "attackers loss_gap, learned, lira, rmia timed at 200 rounds" in t.timed_by
    assert "per-sample risk timed at 30 bootstrap resamples" in t.timed_by
    assert "not timed: gradient, retrain" in t.timed_by


def test_few_rounds_and_no_risk() -> None:
    t = time_ltu_scoring(SPEC, n_defender=20, n_reserved=20, n_classes=2, rounds=3, attackers=["rmia"],
                         options=OPTS, risk=None)
    assert t.seconds > 0 and "timed at 3 rounds" in t.timed_by and "risk" not in t.timed_by


def test_beyond_the_cap_it_extrapolates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ltu_scoring, "MAX_PROBE_ROUNDS", 10)
    monkeypatch.setattr(ltu_scoring, "MAX_PROBE_BOOTSTRAP", 8)
    t = time_ltu_scoring(SPEC, n_defender=20, n_reserved=20, n_classes=2, rounds=25, attackers=["rmia"],
                         options=OPTS, risk=RiskOptions(reference_models=4, bootstrap=30))
    assert "rmia timed at 5 and 10 rounds, extrapolated to 25" in t.timed_by, t.timed_by
    assert "risk timed at 4 and 8 bootstrap resamples, extrapolated to 30" in t.timed_by, t.timed_by


def test_only_untimed_attackers_cost_nothing_here() -> None:
    t = time_ltu_scoring(SPEC, n_defender=20, n_reserved=20, n_classes=2, rounds=10, attackers=sorted(NOT_TIMED),
                         options=OPTS, risk=None)
    assert t.seconds == 0.0 and t.timed_by.endswith("not timed: gradient, retrain")


@pytest.mark.parametrize("kw", [{"n_defender": 1}, {"n_reserved": 0}, {"n_classes": 1}, {"rounds": 0}])
def test_refuses_sizes_it_cannot_time(kw: dict[str, int]) -> None:
    sizes = {"n_defender": 10, "n_reserved": 10, "n_classes": 2, "rounds": 10, **kw}
    with pytest.raises(ValueError, match="time_ltu_scoring needs"):
        time_ltu_scoring(SPEC, attackers=["loss_gap"], options=OPTS, risk=None, **sizes)


@settings(max_examples=80, deadline=None)
@given(fixed=st.floats(0.0, 5.0), per=st.floats(0.0, 0.01), short=st.integers(1, 100), factor=st.integers(2, 5),
       full=st.integers(1, 5000))
def test_scoring_rate_recovers_a_linear_cost(fixed: float, per: float, short: int, factor: int, full: int) -> None:
    long = factor * short
    got = scoring_rate(fixed + short * per, fixed + long * per, short, long, full)
    assert got == pytest.approx(fixed + full * per, rel=1e-6, abs=1e-7)


@settings(max_examples=80, deadline=None)
@given(a=st.floats(0.0, 10.0), b=st.floats(0.0, 10.0), short=st.integers(0, 100), full=st.integers(0, 5000))
def test_scoring_rate_is_never_negative(a: float, b: float, short: int, full: int) -> None:
    assert scoring_rate(a, b, short, short + 10, full) >= 0.0


def test_scoring_rate_refuses_a_bad_pair() -> None:
    with pytest.raises(ValueError, match="short < long"):
        scoring_rate(1.0, 2.0, 10, 10, 100)


def test_the_gradient_pass_is_the_attackers_own_over_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gradient attacker's pass is timed with its own ``gradient_norms`` on a table of the defender's
    architecture: every row at most MAX_GRADIENT_ROWS, beyond it half and all of them (then extrapolated); one torch
    thread, as in the LTU stage; 0 s for a defender the attacker does not apply to."""
    import torch

    import privaudit.attacks.ltu_gradient as ltu_gradient
    from privaudit.planning.ltu_scoring import time_gradient_pass

    real = ltu_gradient.gradient_norms
    seen: list[tuple[int, int, int]] = []

    def spy(table):  # noqa: ANN001, ANN202
        seen.append((table.X.shape[0], table.X.shape[1], torch.get_num_threads()))
        return real(table)

    monkeypatch.setattr(ltu_gradient, "gradient_norms", spy)
    mlp = validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [8], "epochs": 1})
    assert time_gradient_pass(mlp, n_rows=300, d=5, n_classes=3) > 0
    assert seen[-1] == (300, 5, 1) and [s[0] for s in seen] == [64, 300]  # a warm-up, then every row
    seen.clear()
    monkeypatch.setattr(ltu_scoring, "MAX_GRADIENT_ROWS", 200)
    assert time_gradient_pass(mlp, n_rows=1000, d=5, n_classes=3) > 0
    assert [s[0] for s in seen] == [64, 100, 200]
    dp = validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "epochs": 1})
    assert time_gradient_pass(dp, n_rows=1000, d=5, n_classes=3) == 0.0  # no gradient attack on DP-SGD heads
    with pytest.raises(ValueError, match="needs >= 1 row"):
        time_gradient_pass(mlp, n_rows=0, d=5, n_classes=3)
