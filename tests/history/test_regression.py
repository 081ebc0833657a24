"""The regression rule: planted regressions are flagged with what changed; honest reruns are not."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_history_regression import one_run_audit
from privaudit.history.regression import ABS, NOTHING_CHANGED, REL, changes, find_regressions, threshold
from tests.history.conftest import record


def _one_run_eps(sigma: float, seed: int) -> float:
    """ε̂ of a real one-run audit (Steinke et al. 2023's estimator) of a Gaussian mechanism with noise ``sigma``."""
    return one_run_audit(sigma, np.random.default_rng(seed), canaries=1000, guesses=100)


def test_an_identical_rerun_is_not_flagged() -> None:
    assert find_regressions([record(i) for i in range(5)]) == []


def test_reruns_with_other_seeds_are_not_flagged() -> None:
    """Honest reruns: the same recipe audited with 8 other seeds (their ε̂ spread 1.08-1.89 at σ = 1)."""
    eps = [_one_run_eps(1.0, seed) for seed in range(8)]
    assert max(eps) / min(eps) > 1.5  # the sample really moves
    records = [record(i, eps={"dp": {"one_run": e}}) for i, e in enumerate(eps)]
    assert find_regressions(records) == []


def test_a_trainer_edit_that_halves_the_noise_is_flagged_naming_the_trainer() -> None:
    """Three honest audits at σ = 1, then the user's trainer edited to add half the noise (σ = 0.5): the one-run ε̂
    more than doubles and the flag names the edited trainer (its hash in ``data/user_code.json`` changed)."""
    before = [_one_run_eps(1.0, seed) for seed in range(3)]
    after = _one_run_eps(0.5, 100)
    records = [record(i, eps={"dp": {"one_run": e}}, user_code={"dp": "h1"}) for i, e in enumerate(before)]
    records.append(record(3, eps={"dp": {"one_run": after}}, user_code={"dp": "h2"}))
    found = find_regressions(records)
    assert [(g.record, g.defender, g.kind) for g in found] == [(3, "dp", "one_run")]
    assert found[0].changes == ("trainer code of dp",)
    assert after > 2 * np.median(before)
    assert "trainer code of dp" in found[0].text() and "one_run" in found[0].text()


def test_a_package_downgrade_with_rising_epsilon_is_flagged_naming_the_package() -> None:
    """Two recorded runs: opacus downgraded between them and the white-box ε̂ of the DP-SGD defender rising from the
    default audit's 0.958 to 2.1 (the accountant under-reporting ε)."""
    first = record(0, eps={"dpsgd_eps1": {"whitebox": 0.958, "one_run": 0.087}})
    second = record(1, eps={"dpsgd_eps1": {"whitebox": 2.1, "one_run": 0.09}},
                    packages={"numpy": "2.4.6", "opacus": "1.4.0", "torch": "2.13.0+cpu"})
    found = find_regressions([first, second])
    assert [(g.defender, g.kind) for g in found] == [("dpsgd_eps1", "whitebox")]
    assert found[0].changes == ("packages opacus 1.6.0 → 1.4.0",)
    assert found[0].threshold == pytest.approx(0.958 + max(REL * 0.958, ABS))


def test_changes_name_commit_files_data_params_and_nothing() -> None:
    a = record(0, commit="a" * 40)
    b = record(1, commit="b" * 40, digest="d2", params="p2")
    files = {("a" * 40, "b" * 40): ["src/privaudit/defenders/dp_sgd.py"]}
    assert changes(a, b, lambda old, new: files[(old, new)]) == [
        f"commit {'a' * 12} → {'b' * 12} (src/privaudit/defenders/dp_sgd.py)", "data digest d1 → d2",
        "params (defenders)"]
    assert changes(a, record(2)) == []
    # a rise with nothing recorded changed is still flagged, and says so
    found = find_regressions([record(0), record(1, eps={"dpsgd": {"whitebox": 2.5, "one_run": 0.1}})])
    assert found[0].changes == (NOTHING_CHANGED,)


def test_the_fence_uses_a_robust_spread_and_its_floors() -> None:
    m, s, fence = threshold([1.0, 1.0, 1.0, 9.0])  # one wild earlier run does not widen the spread
    assert (m, s, fence) == (1.0, 0.0, 1.5)
    assert threshold([0.0])[2] == ABS  # near zero: the absolute floor
    m, s, fence = threshold([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s == pytest.approx(1.4826) and fence == pytest.approx(3.0 + 3 * 1.4826)
    # a first run is never flagged, nor a bound seen for the first time
    assert find_regressions([record(0, eps={"d": {"one_run": 9.0}})]) == []


def test_a_run_on_another_data_set_starts_its_own_series() -> None:
    """Scheduled runs that switch between params.yaml's data set and a validated drop: the drop's larger ε̂ is not a
    regression of the other data set's series (the walkthrough saw REGRESSION flags on every switch); a rise within
    one data set still is, compared with that data set's runs only."""
    digits = [record(i, eps={"dp": {"one_run": 0.3}}) for i in range(3)]
    drop = record(3, eps={"dp": {"one_run": 2.0}}, identity="csv:data/external/drop.csv", digest="d9")
    again = record(4, eps={"dp": {"one_run": 0.31}})
    assert find_regressions([*digits, drop, again]) == []
    risen = record(5, eps={"dp": {"one_run": 1.4}})
    found = find_regressions([*digits, drop, again, risen])
    assert [(g.record, g.earlier) for g in found] == [(5, 4)]  # the four digits runs, not the drop
    assert found[0].changes == (NOTHING_CHANGED,)  # said against the last digits run, not against the drop
