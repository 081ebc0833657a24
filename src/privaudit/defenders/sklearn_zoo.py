"""The scikit-learn defender zoo of LTU Table 1 (Pedersen et al. 2022, §"Experiments").

Ten estimators with scikit-learn defaults, each under one of three randomness levels with the
paper's meaning (Table 1 columns):

* ``fixed``     – original sample order + fixed random seed (no randomness at all);
* ``shuffled``  – random sample order + fixed random seed;
* ``unseeded``  – random sample order + random seed.

The fixed seed is ``random_state`` from the spec (public: part of the trainer T_D the LTU
attacker knows). The random order and random seed are drawn from the ``seed`` passed to
:meth:`SklearnDefender.fit` (the randomness the attacker does not know).

Estimators without ``predict_proba`` (SVC, LinearSVC, SGD hinge, Perceptron, Bayesian ridge)
report a softmax of their decision scores as probabilities; documented per estimator below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import skops.io as sio
from scipy.special import softmax
from sklearn.base import BaseEstimator
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import BayesianRidge, LogisticRegression, Perceptron, SGDClassifier
from sklearn.multioutput import MultiOutputRegressor
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC, LinearSVC

from privaudit.defenders.base import Defender
from privaudit.defenders.registry import register
from privaudit.defenders.skops_files import dump_skops
from privaudit.defenders.specs import LogRegSpec, SklearnSpec
from privaudit.validation.model_files import TRUSTED_TYPES
from privaudit.seeding import draw_seed

@dataclass(frozen=True)
class _Estimator:
    make: Callable[[int, dict[str, Any]], BaseEstimator]
    #: the model depends on its random_state (so "unseeded" adds randomness)
    uses_seed: bool
    #: permuting training rows leaves the fitted model unchanged (up to float rounding and the
    #: tolerance of a convex solver)
    order_invariant: bool
    #: probabilities come from predict_proba (True) or softmax(decision scores) (False)
    has_proba: bool


def _kw(extra: dict[str, Any], **defaults: Any) -> dict[str, Any]:
    return {**defaults, **extra}


ESTIMATORS: dict[str, _Estimator] = {
    "logistic_regression": _Estimator(
        lambda rs, kw: LogisticRegression(**_kw(kw, solver="lbfgs", max_iter=1000)), False, True, True
    ),
    # Bayesian ridge regression on one-hot targets, one regressor per class (a classifier via
    # argmax of the regressed scores); probabilities = softmax of the scores.
    "bayesian_ridge": _Estimator(lambda rs, kw: MultiOutputRegressor(BayesianRidge(**kw)), False, True, False),
    "gaussian_nb": _Estimator(lambda rs, kw: GaussianNB(**kw), False, True, True),
    # SVC (RBF, one-vs-one) with probability=False: softmax of the ovr-shaped decision function.
    "svc": _Estimator(lambda rs, kw: SVC(**_kw(kw, random_state=rs)), False, True, False),
    "knn": _Estimator(lambda rs, kw: KNeighborsClassifier(**kw), False, True, True),
    # LinearSVC solves a strictly convex problem: random_state only orders liblinear's dual
    # coordinate descent, so seed and row order change the model by solver tolerance only.
    "linear_svc": _Estimator(lambda rs, kw: LinearSVC(**_kw(kw, random_state=rs)), False, True, False),
    "sgd_svm": _Estimator(lambda rs, kw: SGDClassifier(**_kw(kw, loss="hinge", random_state=rs)), True, False, False),
    "mlp": _Estimator(lambda rs, kw: MLPClassifier(**_kw(kw, random_state=rs, max_iter=300)), True, False, True),
    "perceptron": _Estimator(lambda rs, kw: Perceptron(**_kw(kw, random_state=rs)), True, False, False),
    "random_forest": _Estimator(
        lambda rs, kw: RandomForestClassifier(**_kw(kw, random_state=rs, n_jobs=1)), True, False, True
    ),
}

SklearnSpecT = TypeVar("SklearnSpecT", bound=SklearnSpec)


class SklearnDefender(Defender[SklearnSpecT]):
    """One estimator of the zoo under one randomness level (LTU Table 1)."""

    model_suffix = ".skops"

    def __init__(self, spec: SklearnSpecT, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self._est_info = ESTIMATORS[spec.estimator]
        self.model: BaseEstimator | None = None

    @property
    def deterministic(self) -> bool:
        return self.spec.randomness == "fixed" or (
            self.spec.randomness == "shuffled" and self._est_info.order_invariant
        ) or (not self._est_info.uses_seed and self._est_info.order_invariant)

    @property
    def order_invariant(self) -> bool:
        return self._est_info.order_invariant

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "SklearnDefender[SklearnSpecT]":
        rng = np.random.default_rng(seed)
        order = np.arange(len(y))
        random_state = self.spec.random_state
        if self.spec.randomness in ("shuffled", "unseeded"):
            order = rng.permutation(len(y))
        if self.spec.randomness == "unseeded":
            random_state = draw_seed(rng)
        est = self._est_info.make(random_state, dict(self.spec.options))
        Xo, yo = X[order], y[order]
        if isinstance(est, MultiOutputRegressor):
            est.fit(Xo, np.eye(self.n_classes)[yo])
        else:
            est.fit(Xo, yo)
        self.model = est
        return self

    def _require_model(self) -> BaseEstimator:
        if self.model is None:
            raise RuntimeError(f"defender {self.name!r} is not fitted")
        return self.model

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        est = self._require_model()
        out = np.zeros((len(X), self.n_classes), dtype=np.float64)
        if isinstance(est, MultiOutputRegressor):
            return softmax(est.predict(X), axis=1)
        classes = est.classes_.astype(int)
        if self._est_info.has_proba:
            out[:, classes] = est.predict_proba(X)
            # float32 features give float32 probabilities (GaussianNB: row sums off by ~3e-6);
            # renormalise in float64 so rows sum to 1 within the outputs check's 1e-6
            return out / out.sum(axis=1, keepdims=True)
        scores = est.decision_function(X)
        if scores.ndim == 1:  # binary problem: one margin
            scores = np.stack([-scores, scores], axis=1)
        full = np.full((len(X), self.n_classes), -np.inf)
        full[:, classes] = scores
        return softmax(full, axis=1)

    def save(self, path: Path) -> None:
        dump_skops(self._require_model(), path)

    def load(self, path: Path) -> "SklearnDefender[SklearnSpecT]":
        untrusted = sio.get_untrusted_types(file=path)
        unknown = sorted(set(untrusted) - set(TRUSTED_TYPES))
        if unknown:
            raise ValueError(f"refusing to load {path}: it contains untrusted types {unknown}")
        self.model = sio.load(path, trusted=untrusted)
        return self


register("sklearn")(SklearnDefender)


@register("logistic_regression")
class LogisticRegressionDefender(SklearnDefender[LogRegSpec]):
    """``kind: logistic_regression``: scikit-learn LogisticRegression (lbfgs)."""
