"""Black-box one-run audit: validation, reproducibility, planted DP-SGD bugs, validity end to end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.specs import PythonSpec
from privaudit.audits.one_run import OneRunResult, auto_canaries, canary_guesses, one_run_audit
from privaudit.stats.fdp_one_run import gdp_epsilon

from privaudit.testing.planted.blackbox_trainers import train_dp_sgd, train_gaussian_class_sums

PLANTED = "src/privaudit/testing/planted/blackbox_trainers.py"


def _never_called(X, y, seed):  # noqa: ANN001, ANN202
    raise AssertionError("fit must not be called when an argument is invalid")


def _dpsgd(bug: str | None, eps: float = 1.0):  # noqa: ANN202
    return lambda X, y, s: train_dp_sgd(X, y, 10, s, epsilon=eps, bug=bug)


# ----------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("kwargs,match", [
    ({"fit": "train"}, "fit"),
    ({"n_classes": 1}, "n_classes"),
    ({"X": np.zeros(5)}, "X must"),
    ({"X": np.full((4, 2), np.nan)}, "X must be finite"),
    ({"y": np.zeros(3, dtype=int)}, "y must"),
    ({"y": np.full(900, 12)}, "y must"),
    ({"canaries": 5}, "canaries"),
    ({"canaries": "many"}, "canaries"),
    ({"level": 0.0}, "level"),
    ({"level": 1.5}, "level"),
    ({"delta": 0}, "delta"),
    ({"delta": "1e-5"}, "delta"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"method": "lira"}, "method"),
    ({"k_grid": [(0.6, 0.6)]}, "k_grid"),
    ({"k_grid": []}, "k_grid"),
    ({"design": "clipbkd"}, "design"),
    ({"scale": -1.0}, "scale"),
    ({"tail_dim": 100}, "tail_dim"),
    ({"labels": "odd"}, "labels"),
])
def test_arguments_are_validated_before_any_training(kwargs: dict, match: str, digits) -> None:
    args = {"fit": _never_called, "X": digits.X, "y": digits.y, "n_classes": 10, "level": 0.05}
    args.update(kwargs)
    fit = args.pop("fit")
    X, y, K = args.pop("X"), args.pop("y"), args.pop("n_classes")
    with pytest.raises(ValueError, match=match):
        one_run_audit(fit, X, y, K, **args)


def test_model_output_is_checked(digits) -> None:
    class Bad:
        def predict_proba(self, X):  # noqa: ANN001, ANN202
            return np.ones((len(X), 3))

    with pytest.raises(ValueError, match="predict_proba"):
        one_run_audit(lambda X, y, s: Bad(), digits.X, digits.y, 10, level=0.05)
    with pytest.raises(ValueError, match="predict_proba"):
        one_run_audit(lambda X, y, s: object(), digits.X, digits.y, 10, level=0.05)


def test_guesses_pick_lowest_and_highest_losses() -> None:
    g = canary_guesses(np.array([0.5, 0.1, 0.9, 0.3, 0.7]), 2, 1)
    np.testing.assert_array_equal(g, [0, 1, -1, 1, 0])


# ------------------------------------------------------------------------- result and seeding
def test_result_describes_the_audit_and_is_reproducible(digits) -> None:
    fit = _dpsgd(None, 4.0)
    a = one_run_audit(fit, digits.X, digits.y, 10, seed=3, level=0.05, method="fdp")
    b = one_run_audit(fit, digits.X, digits.y, 10, seed=3, level=0.05, method="fdp")
    c = one_run_audit(fit, digits.X, digits.y, 10, seed=4, level=0.05, method="fdp")
    assert isinstance(a, OneRunResult)
    assert a.canaries == auto_canaries(64, 10) == 160
    assert a.neighbourhood == "add_remove" and a.threat_model == "black-box: final model only" and a.runs == 1
    assert a.level == 0.05 and a.delta == 1e-5 and a.method == "fdp"
    assert 0 <= a.correct <= a.guesses <= a.canaries and 0 < a.included < a.canaries
    assert len(a.grid) == 4 and "tail_cells" in a.design and "Bonferroni" in a.design
    assert a.mu_lower_bound is not None and a.eps_lower_bound_fdp == pytest.approx(gdp_epsilon(a.mu_lower_bound, 1e-5))
    fields = ("eps_lower_bound", "eps_lower_bound_fdp", "mu_lower_bound", "included", "correct", "grid")
    assert all(getattr(a, f) == getattr(b, f) for f in fields)  # same seed, same audit
    assert (a.included, a.grid) != (c.included, c.grid)
    with pytest.raises(AttributeError):
        a.eps_lower_bound = 0.0  # type: ignore[misc]
    assert a.as_dict()["canaries"] == 160
    s = one_run_audit(fit, digits.X, digits.y, 10, seed=3, level=0.05)
    assert s.mu_lower_bound is None and s.eps_lower_bound_fdp is None and s.eps_lower_bound_fdp_curve is None
    assert s.eps_lower_bound == a.eps_lower_bound


# ------------------------------------------------------------- the requirement: planted DP-SGD bugs
@pytest.mark.parametrize("bug", ["no_clip", "no_noise"])
def test_planted_dp_sgd_bugs_are_caught_black_box(bug: str, digits) -> None:
    """A plain user trainer claiming eps = 1 (delta = 1e-5) with clipping (c) or noise (d) removed:
    the default one-run audit (160 canaries, one training run) certifies eps > 1 at level 0.05."""
    for seed in (0, 1, 2):
        r = one_run_audit(_dpsgd(bug), digits.X, digits.y, 10, seed=seed, level=0.05, method="fdp")
        print(f"{bug} seed {seed}: eps_hat {r.eps_lower_bound:.2f} (fdp {r.eps_lower_bound_fdp:.2f}, "
              f"curve {r.eps_lower_bound_fdp_curve:.2f}), {r.correct}/{r.guesses} correct, {r.seconds:.1f}s")
        assert r.eps_lower_bound > 1.0
        assert r.eps_lower_bound_fdp_curve > 1.0 and r.eps_lower_bound_fdp > 1.0


def test_correct_dp_sgd_is_not_flagged(digits) -> None:
    for seed in (0, 1, 2):
        r = one_run_audit(_dpsgd(None, 1.0), digits.X, digits.y, 10, seed=seed, level=0.05, method="fdp")
        assert r.eps_lower_bound <= 1.0 and r.eps_lower_bound_fdp_curve <= 1.0


def test_user_python_defender_is_audited_through_the_registry(digits, repo_root: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``kind: python`` path: the spec names the planted trainer file; bug (d) is caught."""
    monkeypatch.chdir(repo_root)
    spec = validate_defender_spec({"name": "user-dpsgd", "kind": "python", "target": f"{PLANTED}:train_no_noise",
                                   "loader": f"{PLANTED}:load", "claimed_epsilon": 1.0, "claimed_delta": 1e-5},
                                  where="defenders[0]")
    assert isinstance(spec, PythonSpec) and spec.claimed_epsilon == 1.0
    r = one_run_audit(lambda X, y, s: make_defender(spec, 10).fit(X, y, s), digits.X, digits.y, 10, seed=0,
                      level=0.05)
    assert r.eps_lower_bound > spec.claimed_epsilon


def test_non_private_logistic_regression_is_fully_exposed(digits) -> None:
    spec = validate_defender_spec({"name": "lr", "kind": "logistic_regression"}, where="defenders[0]")
    r = one_run_audit(lambda X, y, s: make_defender(spec, 10).fit(X, y, s), digits.X, digits.y, 10, seed=0,
                      level=0.05)
    assert r.correct == r.guesses  # every guess right
    assert r.eps_lower_bound > 2.5


# ---------------------------------------------------------------------- validity, end to end
def test_gaussian_trainer_end_to_end_never_overclaims(digits) -> None:
    """200 audits of an exactly mu-GDP trainer (Gaussian mechanism on clipped class sums,
    mu = 0.5, eps(1e-5) = 1.99): P(eps_hat > true eps) <= level.  The bound could reach 3.58 with
    160 canaries, so a leak of the inclusion bits into the guesses would show."""
    mu, level, reps = 0.5, 0.1, 200
    eps_true = gdp_epsilon(mu, 1e-5)
    fit = lambda X, y, s: train_gaussian_class_sums(X, y, 10, s, mu=mu)  # noqa: E731
    e = np.array([one_run_audit(fit, digits.X, digits.y, 10, seed=s, level=level).eps_lower_bound
                  for s in range(reps)])
    print(f"mu={mu}: eps_true {eps_true:.2f}, mean eps_hat {e.mean():.3f}, max {e.max():.2f}")
    assert np.mean(e > eps_true) <= level + 3 * math.sqrt(level * (1 - level) / reps)
    assert e.max() > 0  # the audit sees something


def test_auto_canaries_rule() -> None:
    assert auto_canaries(64, 10) == 160
    assert auto_canaries(4, 2) == 100  # floor
    assert auto_canaries(2048, 100) == 1000  # cap
    assert auto_canaries(64, 10, tail_dim=8) == 100
