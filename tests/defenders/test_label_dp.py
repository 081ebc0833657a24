"""ALIBI / AGIBI (Malek et al. 2021): posteriors, simplex projection (Alg. 4), accuracy vs epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from privaudit.defenders.label_dp import agibi_posterior, alibi_posterior
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.simplex import project_simplex
from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma


def test_alibi_posterior_golden() -> None:
    # o = (1.5, -0.2, 0.3), lambda = 2 (eps = 1), uniform prior:
    # ||o - e_c||_1 = (0.5+0.2+0.3, 1.5+1.2+0.3, 1.5+0.2+0.7) = (1.0, 3.0, 2.4)
    o = np.array([[1.5, -0.2, 0.3]])
    p = alibi_posterior(o, 2.0, np.log(np.full(3, 1 / 3)))
    w = np.exp(-np.array([1.0, 3.0, 2.4]) / 2.0)
    np.testing.assert_allclose(p[0], w / w.sum(), rtol=1e-12)


def test_agibi_posterior_golden_and_sigma() -> None:
    o = np.array([[0.9, 0.2]])
    prior = np.log(np.array([0.25, 0.75]))
    p = agibi_posterior(o, 0.5, prior)
    logits = o[0] / 0.25 + prior
    np.testing.assert_allclose(p[0], np.exp(logits) / np.exp(logits).sum(), rtol=1e-12)
    spec = validate_defender_spec({"name": "g", "kind": "agibi", "epsilon": 2.0, "delta": 1e-6})
    m = make_defender(spec, 10)
    assert m.noise_scale() == pytest.approx(gaussian_mechanism_sigma(2.0, 1e-6, sensitivity=math.sqrt(2)))
    assert m.claimed_epsilon() == 2.0 and m.claimed_delta() == 1e-6
    assert m.describe()["privacy_unit"] == "label"


def test_alibi_noise_has_laplace_scale() -> None:
    spec = validate_defender_spec({"name": "a", "kind": "alibi", "epsilon": 0.5, "postprocess": "simplex"})
    m = make_defender(spec, 4)
    assert m.noise_scale() == 4.0
    noise = m._noise(np.random.default_rng(0), (20000, 4))
    # Laplace(b): mean |x| = b
    assert np.mean(np.abs(noise)) == pytest.approx(4.0, rel=0.03)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 8), elements=st.floats(-5, 5)))
def test_simplex_projection_properties(o: np.ndarray) -> None:
    p = project_simplex(o)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(project_simplex(p), p, atol=1e-9)  # idempotent
    # variational inequality of the Euclidean projection: <o - p, q - p> <= 0 for all q in the simplex
    q = np.random.default_rng(len(o)).dirichlet(np.ones(len(o)), size=50)
    assert np.all((q - p) @ (o - p) <= 1e-9)


def test_simplex_projection_golden() -> None:
    np.testing.assert_allclose(project_simplex([0.8, 0.6, -0.3]), [0.6, 0.4, 0.0])
    np.testing.assert_allclose(project_simplex([[0.2, 0.2], [3.0, 1.0]]), [[0.5, 0.5], [1.0, 0.0]])
    with pytest.raises(ValueError):
        project_simplex([np.nan, 1.0])


def _accuracy(kind: str, eps: float, data, postprocess: str) -> float:
    spec = validate_defender_spec({"name": "l", "kind": kind, "epsilon": eps, "hidden": [], "epochs": 8,
                                   "postprocess": postprocess})
    accs = []
    for seed in range(3):
        m = make_defender(spec, 10).fit(data.X, data.y, seed=seed)
        accs.append(np.mean(m.predict_proba(data.Xt).argmax(axis=1) == data.yt))
    return float(np.mean(accs))


@pytest.mark.parametrize("kind,postprocess", [("alibi", "bayes"), ("agibi", "bayes"), ("alibi", "simplex")])
def test_accuracy_falls_as_epsilon_falls(kind: str, postprocess: str, medium) -> None:
    acc = [_accuracy(kind, eps, medium, postprocess) for eps in (0.1, 1.0, 10.0)]
    assert acc[2] > 0.75, acc  # little noise: near the non-private head
    assert acc[0] < 0.25, acc  # labels nearly destroyed: near chance (0.1)
    assert acc[0] < acc[1] + 0.03 and acc[1] < acc[2], acc
