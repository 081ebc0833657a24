"""Sequential canary runs for defenders without a batched recipe (sklearn models, user trainers).

Game 3 (Malek et al. 2021, App. B, Fig. 4) and Lifted-DP trials (Pillutla et al. 2023,
Algorithm 1 lines 2-6; App. B.2 replace-one) fitted one ``make_defender`` model at a time.
Only ``lidp.canary_type: mislabel`` is possible here (ClipBKD labels and random-gradient
canaries need the batched trainer). Only raw per-canary outcomes are returned; thresholds and
intervals are computed, and recomputed, by the game3/lidp stages without retraining.
"""

from __future__ import annotations


import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.canaries.designs import CanaryDraw, wrong_labels
from privaudit.losses import cross_entropy
from privaudit.defenders.registry import make_defender
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.features.feature_set import FeatureSet
from privaudit.seeding import draw_seeds

__all__ = ["wrong_labels", "fit_predict", "game3_sequential", "lidp_trial_sequential"]


def fit_predict(spec: DefenderSpecBase, n_classes: int, device: str, X: np.ndarray, y: np.ndarray, seed: int,
                X_query: np.ndarray) -> np.ndarray:
    """Fit ``spec`` on (X, y) with ``seed``; probabilities on ``X_query`` (q, C)."""
    model = make_defender(spec, n_classes=n_classes, device=device)
    model.fit(X, y, seed=seed)
    return model.predict_proba(X_query)


def game3_sequential(spec: DefenderSpecBase, fs: FeatureSet, draw: dict[str, np.ndarray], seed: int,
                     device: str = "cpu") -> np.ndarray:
    """One Game-3 run: the draw's canaries relabelled with ``label_pair[bit]``; proba (N, C)."""
    Xd, yd = fs.defender
    idx, pair, bit = draw["canary_index"], draw["label_pair"], draw["bit"]
    y_train = yd.copy()
    y_train[idx] = pair[np.arange(len(bit)), bit]
    return fit_predict(spec, fs.n_classes, device, Xd, y_train, seed, Xd[idx])


def lidp_trial_sequential(spec: DefenderSpecBase, fs: FeatureSet, draw: CanaryDraw, k: int, m: int,
                          neighbourhood: str, rng: np.random.Generator,
                          device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """One trial: losses (K,) of θ1 on c_1..c_K and (m,) on the fresh nulls (θ0, or θ1 for replace-one)."""
    if draw.X is None or draw.y is None:
        raise ValueError("sequential LiDP trials support lidp.canary_type: mislabel only")
    Xd, yd = fs.defender
    cX, cy = draw.X, draw.y
    seed1, seed0 = (int(s) for s in draw_seeds(rng, 2))
    X1, y1 = np.concatenate([Xd, cX[:k]]), np.concatenate([yd, cy[:k]])
    if neighbourhood == Neighbourhood.REPLACE_ONE:
        p = fit_predict(spec, fs.n_classes, device, X1, y1, seed1, cX)
        loss = cross_entropy(p, cy)
        return loss[:k], loss[k:]
    X0, y0 = np.concatenate([Xd, cX[: k - 1]]), np.concatenate([yd, cy[: k - 1]])
    p1 = fit_predict(spec, fs.n_classes, device, X1, y1, seed1, cX[:k])
    p0 = fit_predict(spec, fs.n_classes, device, X0, y0, seed0, cX[k:])
    return cross_entropy(p1, cy[:k]), cross_entropy(p0, cy[k:])
