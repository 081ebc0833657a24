"""LiDP audit statistics: honest τ, all orders, K = 1 baseline, curve; Gaussian self-check with known ε."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.audits.lidp import lidp_audit
from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma, simulate_gaussian_scores

KW = dict(delta=1e-5, level=0.05, order=2, method="wilson", tune_fraction=0.5, n_thresholds=20)


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
        # issue 13 added the exact 1st-order interval (Clopper-Pearson) to the families reported
        assert set(r["by_order"]) == {f"{m}_{o}" for m in ("wilson", "bernstein") for o in (1, 2, 4)} | {
            "clopper_pearson_1"}
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


# ------------------------------------------------------------------------------------ issue 13


def test_bonferroni_curve_last_point_equals_headline() -> None:
    """The curve is certified at β/T like the headline (it used β: its last point exceeded the
    headline in 31-100% of runs)."""
    for seed in range(3):
        x, y = _gauss(4.0, 160, 12, seed)
        res, curve = lidp_audit(x, y, rng=np.random.default_rng(seed), tau_selection="bonferroni", **KW)
        assert curve["trials"].iloc[-1] == res["certified_trials"]
        assert curve["eps_ksqrt"].iloc[-1] == pytest.approx(res["eps_lower_bound"], abs=1e-12)
        assert curve["eps_k1"].iloc[-1] == pytest.approx(res["eps_lower_bound_k1"], abs=1e-12)
        assert res["eps_lower_bound"] > 0  # a non-trivial check
        assert res["level"] == 0.05 and res["level_per_threshold"] < 0.05 / 5


def test_bonferroni_grid_is_built_on_pilot_trials_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the certification trials' scores must not move the τ grid (a union bound over a
    grid that depends on the certified outcomes is not valid)."""
    import privaudit.audits.lidp as la

    grids: list[np.ndarray] = []
    real = la.certify_bonferroni

    def spy(sx, sy, thresholds, *a, **kw):  # type: ignore[no-untyped-def]
        if len(thresholds) > 1:
            grids.append(np.asarray(thresholds).copy())
        return real(sx, sy, thresholds, *a, **kw)

    monkeypatch.setattr(la, "certify_bonferroni", spy)
    x, y = _gauss(4.0, 64, 8, 7)
    res, _ = lidp_audit(x, y, rng=np.random.default_rng(0), tau_selection="bonferroni", **KW)
    assert (res["tuning_trials"], res["certified_trials"]) == (8, 56)  # pilot_fraction = 1/8
    pilot = np.random.default_rng(0).permutation(64)[:8]
    x2, y2 = x * 3.0 + 1.0, y * 3.0 + 1.0  # move every trial's scores ...
    x2[pilot], y2[pilot] = x[pilot], y[pilot]  # ... except the pilot's
    first = list(grids)
    grids.clear()
    res2, _ = lidp_audit(x2, y2, rng=np.random.default_rng(0), tau_selection="bonferroni", **KW)
    assert len(first) == len(grids) == 8  # 7 interval families + the K = 1 view
    for a, b in zip(first, grids):
        np.testing.assert_array_equal(a, b)
    # ... whereas a grid built from all trials (the old construction) moves with them
    assert not np.array_equal(la._grid(-x, -y, 20), la._grid(-x2, -y2, 20))


def test_capped_equal_losses_are_distinct_trials() -> None:
    """A trainer whose losses are capped gives many identical trials; they are not 'reused'."""
    rng = np.random.default_rng(5)
    x = np.minimum(rng.exponential(0.2, (64, 8)), 1.0)
    y = np.minimum(rng.exponential(1.0, (64, 8)), 1.0)
    x[::2], y[::2] = 1.0, 1.0  # every other trial: all losses at the cap
    for selection in ("split", "bonferroni"):
        res, curve = lidp_audit(x, y, rng=np.random.default_rng(0), tau_selection=selection, **KW)
        assert res["certified_trials"] + res["tuning_trials"] == 64 and len(curve) > 0


def test_level_and_exact_first_order_are_reported() -> None:
    x, y = _gauss(4.0, 64, 8, 2)
    kw = {**KW, "order": 1, "level": 0.1}
    res, curve = lidp_audit(x, y, rng=np.random.default_rng(0), **kw)
    assert res["level"] == res["beta"] == 0.1 and res["level_per_threshold"] == 0.1
    assert (res["method"], res["requested_method"], res["method_k1"]) == ("clopper_pearson", "wilson", "clopper_pearson")
    assert res["eps_lower_bound"] == res["by_order"]["clopper_pearson_1"]
    assert curve["eps_ksqrt"].iloc[-1] == pytest.approx(res["eps_lower_bound"])
    off, _ = lidp_audit(x, y, rng=np.random.default_rng(0), exact_first_order=False, **kw)
    assert off["method"] == "wilson" and off["eps_lower_bound"] == off["by_order"]["wilson_1"]
    res2, _ = lidp_audit(x, y, rng=np.random.default_rng(0), **KW)  # order 2: Wilson kept, K = 1 view exact
    assert (res2["method"], res2["method_k1"]) == ("wilson", "clopper_pearson")
    assert res2["eps_lower_bound"] == res2["by_order"]["wilson_2"]


def test_pilot_fraction_is_a_params_key_that_reaches_the_audit() -> None:
    """``lidp.pilot_fraction`` (bonferroni): read from params.yaml, validated there, passed to the audit."""
    from pathlib import Path

    import yaml

    from privaudit.config import LidpParams, ParamsError, parse_params
    from privaudit.audits.lidp import LidpSettings
    from privaudit.audits.protocol import settings_from

    x, y = _gauss(4.0, 200, 14, 0)
    for lidp, split in [(LidpParams(tau_selection="bonferroni", pilot_fraction=0.25), (50, 150)),
                        (LidpParams(tau_selection="bonferroni"), (25, 175))]:
        res, _ = settings_from(LidpSettings, lidp).audit(x, y, delta=1e-5, level=0.05, rng=np.random.default_rng(0))
        assert (res["tuning_trials"], res["certified_trials"]) == split
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    assert parse_params(raw).lidp.pilot_fraction == 0.125
    raw["lidp"]["pilot_fraction"] = 1.0
    with pytest.raises(ParamsError, match="lidp.pilot_fraction"):
        parse_params(raw)
