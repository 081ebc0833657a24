"""LiDP audit statistics: honest τ, all orders, K = 1 baseline, curve; Gaussian self-check with known ε."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.lidp_audit import lidp_audit
from privaudit.mechanisms import gaussian_mechanism_sigma, simulate_gaussian_scores

KW = dict(delta=1e-5, beta=0.05, order=2, method="wilson", tune_fraction=0.5, n_thresholds=20)


def _gauss(eps: float, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    sx, sy = simulate_gaussian_scores(gaussian_mechanism_sigma(eps, 1e-5), n, k, 10_000, np.random.default_rng(seed))
    return -sx, -sy  # losses: lower = member


@pytest.mark.parametrize("selection", ["split", "bonferroni"])
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_gaussian_mechanism_bound_is_valid_and_informative(eps: float, selection: str) -> None:
    """Known truth (LiDP §4): ε̂ never exceeds the true ε over repetitions and is > 0 at ε = 4."""
    res = [lidp_audit(*_gauss(eps, 400, 20, s), rng=np.random.default_rng(s), tau_selection=selection, **KW)[0]
           for s in range(5)]
    for r in res:
        assert r["eps_lower_bound"] <= eps and r["eps_lower_bound_k1"] <= eps
        assert max(r["by_order"].values()) <= eps
        assert set(r["by_order"]) == {f"{m}_{o}" for m in ("wilson", "bernstein") for o in (1, 2, 4)}
    if eps == 4.0:
        assert min(r["eps_lower_bound"] for r in res) > 0.5
        # the K = sqrt(n) audit beats the K = 1 baseline on the same trials (LiDP Fig. 3)
        assert np.mean([r["eps_lower_bound"] for r in res]) > np.mean([r["eps_lower_bound_k1"] for r in res])


def test_curve_and_split_sizes() -> None:
    x, y = _gauss(4.0, 200, 14, 0)
    res, curve = lidp_audit(x, y, rng=np.random.default_rng(0), **KW)
    assert (res["tuning_trials"], res["certified_trials"]) == (100, 100)
    assert list(curve.columns) == ["trials", "eps_k1", "eps_ksqrt"]
    assert curve["trials"].iloc[-1] == 100 and curve["trials"].is_monotonic_increasing and curve["trials"].is_unique
    assert curve["eps_ksqrt"].iloc[-1] == pytest.approx(res["eps_lower_bound"])


def test_same_inputs_same_result_and_errors() -> None:
    x, y = _gauss(2.0, 50, 7, 1)
    a = lidp_audit(x, y, rng=np.random.default_rng(3), **KW)[0]
    b = lidp_audit(x, y, rng=np.random.default_rng(3), **KW)[0]
    assert a == b
    with pytest.raises(ValueError, match="tune_fraction"):
        lidp_audit(x[:2], y[:2], rng=np.random.default_rng(0), **{**KW, "tune_fraction": 0.1})
    with pytest.raises(ValueError, match="lidp.tau_selection"):
        lidp_audit(x, y, rng=np.random.default_rng(0), tau_selection="max", **KW)
