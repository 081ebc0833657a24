"""Done-when checks: DP-SGD at ε = 1 is never audited above 1; a non-private recipe gets a large ε̂."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.audits.game3 import game3_interval
from privaudit.audits.lidp import lidp_audit
from privaudit.canaries.runner import run_trials
from tests.canaries.conftest import digits_features, make_params

DP1 = {"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "epochs": 10}
TAUS = np.linspace(0.5, 0.99, 10)


@pytest.fixture(scope="module")
def fs():  # type: ignore[no-untyped-def]
    return digits_features()


def _lidp(fs, spec, **lidp):  # type: ignore[no-untyped-def]
    p = make_params([spec], lidp={"trials": 64, "canaries": 8, "null_canaries": 8, **lidp},
                    compute={"block_trials": 32})
    out = run_trials(p, fs, spec["name"], "lidp", 0, 64, "cpu")
    res, curve = lidp_audit(out["loss_in"], out["loss_null"], delta=1e-5, level=0.05, order=2, method="wilson",
                            tune_fraction=0.5, n_thresholds=16, rng=np.random.default_rng(0))
    return res, curve


@pytest.mark.parametrize("ctype", ["mislabel", "random_gradient"])
def test_dp_sgd_at_eps_1_is_never_audited_above_1(fs, ctype) -> None:
    res, curve = _lidp(fs, DP1, canary_type=ctype)
    assert res["eps_lower_bound"] <= 1.0 and res["eps_lower_bound_k1"] <= 1.0
    assert max(res["by_order"].values()) <= 1.0
    assert list(curve.columns) == ["trials", "eps_k1", "eps_ksqrt"] and curve["trials"].is_monotonic_increasing
    p = make_params([DP1], game3={"canaries": 300})
    g = run_trials(p, fs, "dp", "game3", 0, 1, "cpu")
    run = {k: g[k][0] for k in ("proba", "label_pair", "bit", "true_label")}
    r = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    assert r["eps_low"] <= 1.0 and r["acgr"]["eps_low"] <= 1.0


def test_non_private_recipe_gets_a_large_epsilon(fs) -> None:
    """The same audit code on a memorising recipe (no DP, many epochs) certifies a large ε̂."""
    mlp = {"name": "mlp", "kind": "torch_mlp", "hidden": [256], "epochs": 150, "lr": 0.02, "batch_size": 32}
    p = make_params([mlp], game3={"canaries": 100})
    g = run_trials(p, fs, "mlp", "game3", 0, 1, "cpu")
    run = {k: g[k][0] for k in ("proba", "label_pair", "bit", "true_label")}
    r = game3_interval(run, TAUS, np.random.default_rng(0), level=0.025)
    assert r["eps_low"] > 2.0, r
