"""Game-3 adversary and honest τ choice on synthetic runs with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.game3 import game3_guesses
from privaudit.audits.game3 import game3_interval

TAUS = np.linspace(0.5, 0.99, 10)


def _run(n: int, strength: float, rng: np.random.Generator, c: int = 10) -> dict[str, np.ndarray]:
    """Canaries whose trained label gets probability ``strength`` (0: uninformative)."""
    true = rng.integers(0, c, n)
    pair = np.stack([(true + 1) % c, (true + 2) % c], axis=1)
    bit = rng.integers(0, 2, n)
    proba = rng.dirichlet(np.ones(c), size=n) * (1 - strength)
    proba[np.arange(n), pair[np.arange(n), bit]] += strength
    return {"proba": proba, "label_pair": pair, "bit": bit, "true_label": true}


@pytest.mark.parametrize("how", ["bonferroni", "split"])
def test_memorised_canaries_give_a_large_epsilon(how: str) -> None:
    r = game3_interval(_run(1000, 0.95, np.random.default_rng(0)), TAUS, np.random.default_rng(1), how, level=0.025)
    assert r["eps_low"] > 4.0 and r["acgr"]["eps_low"] > 2.0
    assert r["certified_canaries"] == (1000 if how == "bonferroni" else 500)


def test_uninformative_model_is_not_certified() -> None:
    """No signal: the adversary is a coin; the lower bound stays 0 in (almost) every repetition."""
    lows = [game3_interval(_run(400, 0.0, np.random.default_rng(s)), TAUS, np.random.default_rng(s),
                           level=0.025)["eps_low"]
            for s in range(40)]
    assert np.mean(np.array(lows) > 0) <= 0.1


def test_bonferroni_equals_fixed_tau_bound_at_corrected_level() -> None:
    from privaudit.stats import game3_epsilon

    run = _run(300, 0.6, np.random.default_rng(3))
    r = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    guessed, correct = game3_guesses(run["proba"], run["label_pair"], run["bit"], TAUS)
    best = max(game3_epsilon(int(correct[t].sum()), int(guessed[t].sum()), level=0.025 / len(TAUS))[0]
               for t in range(len(TAUS)) if guessed[t].any())
    assert r["eps_low"] == pytest.approx(best)


def test_runs_are_reported_separately() -> None:
    rng = np.random.default_rng(4)
    runs = [_run(100, 0.9, rng) for _ in range(3)]
    pooled = {k: np.concatenate([r[k] for r in runs]) for k in runs[0]}
    pooled["run"] = np.repeat(np.arange(3), 100)
    r = game3_interval(pooled, TAUS, np.random.default_rng(0), level=0.025)
    assert r["runs"] == 3 and len(r["per_run"]) == 3 and r["canaries"] == 300
    assert all(p["eps_low"] < r["eps_low"] for p in r["per_run"])  # more canaries, tighter bound


def test_bad_selection_name() -> None:
    with pytest.raises(ValueError, match="game3.tau_selection"):
        game3_interval(_run(10, 0.5, np.random.default_rng(0)), TAUS, np.random.default_rng(0), "best", level=0.025)


def test_level_is_one_sided_half_of_alpha() -> None:
    run = _run(300, 0.8, np.random.default_rng(6))
    a = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    assert a["level"] == 0.025 and a["level_per_threshold"] == pytest.approx(0.025 / len(TAUS))
    assert a["alpha"] == 0.05  # the two-sided alpha of each reported interval, 2 * level
    b = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    assert b == a
    c = game3_interval(run, TAUS, np.random.default_rng(0), "split", level=0.01)
    assert c["alpha"] == 0.02 and c["level_per_threshold"] == 0.01
    assert c["eps_low"] <= game3_interval(run, TAUS, np.random.default_rng(0), "split", level=0.05)["eps_low"]
    for bad in (0.5, 0.0, 1.5):
        with pytest.raises(ValueError, match="level"):
            game3_interval(run, TAUS, np.random.default_rng(0), level=bad)
    with pytest.raises(TypeError, match="level"):
        game3_interval(run, TAUS, np.random.default_rng(0))  # type: ignore[call-arg]


def test_acgr_all_right_gives_a_finite_bound() -> None:
    """Every canary right on every alternative: no zero-width interval, a finite eps_low."""
    run = _run(200, 1.0, np.random.default_rng(8))
    r = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    assert 0 < r["acgr"]["eps_low"] < np.inf and r["acgr"]["eps_high"] == np.inf
