"""Canary training runs: Game 3 (Malek et al. 2021, App. B, Fig. 4) and Lifted DP trials
(Pillutla et al. 2023, Algorithm 1 lines 2-6) for one defender recipe.

Only the training happens here; the raw per-canary outcomes are returned (and saved by the
stage) so that thresholds and intervals are computed, and recomputed, by the statistics
stages without retraining.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from privaudit.defenders.base import cross_entropy
from privaudit.defenders.registry import make_defender
from privaudit.defenders.training import FeatureSet


def _fit_predict(
    spec: dict[str, Any], n_classes: int, device: str, X: np.ndarray, y: np.ndarray, seed: int, X_query: np.ndarray
) -> np.ndarray:
    model = make_defender(spec, n_classes=n_classes, device=device)
    model.fit(X, y, seed=seed)
    return model.predict_proba(X_query)


def wrong_labels(y: np.ndarray, n_classes: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct labels ≠ y[i] per row, uniformly at random. Shape (len(y), count)."""
    if count > n_classes - 1:
        raise ValueError(f"need {count} distinct wrong labels but only {n_classes - 1} exist")
    # rank random keys; the true label gets +inf so it is never among the first `count`
    keys = rng.random((len(y), n_classes))
    keys[np.arange(len(y)), y] = np.inf
    return np.argsort(keys, axis=1)[:, :count]


@dataclass(frozen=True)
class Game3Run:
    """Raw outcome of one Game-3 training run with N mislabeled canaries.

    Attributes:
        canary_index: (N,) positions of the canaries in the Defender set.
        true_label: (N,) y_i.
        label_pair: (N, 2) the two wrong labels (y'_i, y''_i).
        bit: (N,) b_i; the model was trained with label_pair[i, b_i].
        proba: (N, C) the trained model's probabilities on the canaries.
    """

    canary_index: np.ndarray
    true_label: np.ndarray
    label_pair: np.ndarray
    bit: np.ndarray
    proba: np.ndarray

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in ("canary_index", "true_label", "label_pair", "bit", "proba")}


def run_game3(
    spec: dict[str, Any], fs: FeatureSet, n_canaries: int, rng: np.random.Generator, device: str = "cpu"
) -> Game3Run:
    """Game 3 (Fig. 4): relabel N random Defender samples with y' or y'' by a fair bit, train once.

    Raises:
        ValueError: ``game3.canaries`` larger than the Defender set, or fewer than 3 classes
            (two distinct wrong labels are needed).
    """
    Xd, yd = fs.defender
    if n_canaries > len(yd):
        raise ValueError(f"game3.canaries={n_canaries} exceeds the {len(yd)} Defender samples available as canaries")
    if fs.n_classes < 3:
        raise ValueError(f"Game 3 needs >= 3 classes (two wrong labels per canary), data set has {fs.n_classes}")
    idx = np.sort(rng.choice(len(yd), size=n_canaries, replace=False))
    pair = wrong_labels(yd[idx], fs.n_classes, 2, rng)
    bit = rng.integers(0, 2, size=n_canaries)
    y_train = yd.copy()
    y_train[idx] = pair[np.arange(n_canaries), bit]
    proba = _fit_predict(spec, fs.n_classes, device, Xd, y_train, int(rng.integers(2**31 - 1)), Xd[idx])
    return Game3Run(idx, yd[idx], pair, bit, proba)


@dataclass(frozen=True)
class LidpTrial:
    """Raw outcome of one LiDP trial (Algorithm 1 lines 3-6), before thresholding.

    Attributes:
        loss_in: (K,) loss of θ1 (trained with all K canaries) on c_1..c_K.
        loss_null: (m,) loss of θ0 (trained with c_1..c_{K−1}) on the fresh canaries c'_1..c'_m.
    """

    loss_in: np.ndarray
    loss_null: np.ndarray


def draw_mislabel_canaries(
    pool_X: np.ndarray, pool_y: np.ndarray, n_classes: int, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` i.i.d. canaries from P_canary: a pool sample with a uniformly random wrong label.

    Returns (X (count, d), y (count,)).
    """
    pick = rng.integers(0, len(pool_y), size=count)
    labels = wrong_labels(pool_y[pick], n_classes, 1, rng)[:, 0]
    return pool_X[pick], labels


def run_lidp_trial(
    spec: dict[str, Any], fs: FeatureSet, k: int, m: int, rng: np.random.Generator, device: str = "cpu"
) -> LidpTrial:
    """One trial of Algorithm 1 with ``mislabel`` canaries drawn from the Reserved side.

    D is the Defender set; D1 = D ∪ {c_1..c_K}, D0 = D ∪ {c_1..c_{K−1}}; the null canaries
    c'_1..c'_m are fresh draws that neither model saw.
    """
    Xd, yd = fs.defender
    Xr, yr = fs.reserved
    cX, cy = draw_mislabel_canaries(Xr, yr, fs.n_classes, k + m, rng)
    seed1, seed0 = (int(s) for s in rng.integers(0, 2**31 - 1, size=2))
    X1, y1 = np.concatenate([Xd, cX[:k]]), np.concatenate([yd, cy[:k]])
    X0, y0 = np.concatenate([Xd, cX[: k - 1]]), np.concatenate([yd, cy[: k - 1]])
    p1 = _fit_predict(spec, fs.n_classes, device, X1, y1, seed1, cX[:k])
    p0 = _fit_predict(spec, fs.n_classes, device, X0, y0, seed0, cX[k:])
    return LidpTrial(cross_entropy(p1, cy[:k]), cross_entropy(p0, cy[k:]))


def check_lidp_sizes(fs: FeatureSet, k: int, m: int, trials: int) -> None:
    """Validate LiDP sizes before any training (names the params keys)."""
    if trials < 2:
        raise ValueError(f"lidp.trials must be >= 2, got {trials}")
    if k < 1 or m < 1:
        raise ValueError(f"lidp.canaries (K={k}) and lidp.null_canaries (m={m}) must be >= 1")
    pool = int((~fs.is_defender).sum())
    if k + m > pool:
        raise ValueError(
            f"lidp.canaries + lidp.null_canaries = {k + m} exceeds the canary pool of {pool} Reserved samples"
        )


def run_lidp_trials(
    spec: dict[str, Any], fs: FeatureSet, k: int, m: int, rngs: Iterable[np.random.Generator],
    device: str = "cpu", progress: Callable[[Iterable[Any]], Iterable[Any]] = lambda it: it,
) -> tuple[np.ndarray, np.ndarray]:
    """Run trials, one per generator. Returns raw losses (n, K) and (n, m)."""
    trials = [run_lidp_trial(spec, fs, k, m, rng, device) for rng in progress(list(rngs))]
    return np.stack([t.loss_in for t in trials]), np.stack([t.loss_null for t in trials])
