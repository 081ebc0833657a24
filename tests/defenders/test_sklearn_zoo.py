"""LTU Table-1 zoo: every estimator under every randomness level; declarations match behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import skops.io as sio
from sklearn.preprocessing import FunctionTransformer

from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.sklearn_zoo import ESTIMATORS

LEVELS = ("fixed", "shuffled", "unseeded")
#: "the same model" up to float rounding of another summation order (float32 features)
SAME = {"rtol": 0.0, "atol": 1e-4}
#: "another model": some probability moves by more than this
DIFFERENT = 1e-3
#: small models; convex solvers run to a tight tolerance so that "invariant" means invariant,
#: not "within the default stopping tolerance" (lbfgs/libsvm defaults move probabilities by 1e-3..5e-2)
OPTIONS = {
    "random_forest": {"n_estimators": 10},
    "mlp": {"max_iter": 30, "hidden_layer_sizes": [16], "batch_size": 32},
    "logistic_regression": {"solver": "newton-cg", "tol": 1e-10, "max_iter": 1000},  # lbfgs stops on ftol
    "svc": {"tol": 1e-10},
    "linear_svc": {"tol": 1e-12, "max_iter": 100000},
}


def _fit(est: str, level: str, X: np.ndarray, y: np.ndarray, seed: int):
    spec = validate_defender_spec({"name": f"{est}-{level}", "kind": "sklearn", "estimator": est,
                                   "randomness": level, "options": OPTIONS.get(est, {})})
    return make_defender(spec, 10).fit(X, y, seed=seed)


@pytest.fixture(scope="module")
def small(tiny):
    return tiny.X, tiny.y, tiny.Xt[:100]  # 300 rows: more than one sklearn MLP batch (200)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("est", sorted(ESTIMATORS))
def test_determinism_declaration_matches_behaviour(est: str, level: str, small) -> None:
    X, y, Xt = small
    a = _fit(est, level, X, y, seed=1)
    b = _fit(est, level, X, y, seed=2)
    pa, pb = a.predict_proba(Xt), b.predict_proba(Xt)
    assert pa.shape == (len(Xt), 10) and np.allclose(pa.sum(axis=1), 1.0)
    if a.deterministic:
        np.testing.assert_allclose(pa, pb, **SAME)
    else:
        assert np.abs(pa - pb).max() > DIFFERENT, f"{est}/{level} declared random but fits agree"


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("est", sorted(ESTIMATORS))
def test_order_invariance_declaration_matches_behaviour(est: str, small) -> None:
    X, y, Xt = small
    perm = np.random.default_rng(5).permutation(len(y))
    a = _fit(est, "fixed", X, y, seed=1)
    b = _fit(est, "fixed", X[perm], y[perm], seed=1)
    pa, pb = a.predict_proba(Xt), b.predict_proba(Xt)
    if a.order_invariant:
        np.testing.assert_allclose(pa, pb, **SAME)
    else:
        assert np.abs(pa - pb).max() > DIFFERENT, f"{est}: declared order dependent but permuted fit agrees"


def test_load_refuses_untrusted_types(tmp_path: Path, small) -> None:
    X, y, _ = small
    model = _fit("logistic_regression", "fixed", X, y, seed=0)
    evil = tmp_path / "model.skops"
    sio.dump(FunctionTransformer(func=os.system), evil)  # would call os.system: not a trusted type
    assert len(sio.get_untrusted_types(file=evil)) == 1  # posix.system (nt.system on Windows)
    with pytest.raises(ValueError, match="untrusted types"):
        model.load(evil)
