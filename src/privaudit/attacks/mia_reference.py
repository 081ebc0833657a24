"""Reference ("shadow") models for the offline LiRA / RMIA attackers, trained on Reserved data only.

K reference models are trained with the defender's own trainer T_D on random subsets (a
``fraction`` of D_R each). In an LTU round the hidden Reserved sample r must not have been
used (its membership label is hidden), so round k may only use the models whose subset does
not contain r. :class:`ReferencePool` enforces this: its accessors return NaN for the unusable
models of each round, so predictions of a model trained on r never reach the attacker.
Both candidates are "out" for every usable model (d is never in a Reserved subset).

Defenders with a batched recipe (``kind: torch_mlp`` / ``dp_sgd``) train the K models in
chunks of at most ``max_models`` per call of the batched trainer
(:func:`privaudit.attacks.batched_mocks.reference_confidences`); other kinds fit them one by one
(joblib workers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import Parallel, delayed

from privaudit.attacks.batched_mocks import MAX_MODELS, batched_recipe, reference_confidences


def _fit_conf(spec: dict[str, Any], n_classes: int, X: np.ndarray, y: np.ndarray,
              rows: np.ndarray, seed: int) -> np.ndarray:
    from threadpoolctl import threadpool_limits

    from privaudit.defenders.registry import make_defender

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            m = make_defender(spec, n_classes=n_classes, device="cpu").fit(X[rows], y[rows], seed=seed)
            p = m.predict_proba(X)
    finally:
        torch.set_num_threads(threads)
    return p[np.arange(len(y)), y]


def train_reference_confidences(spec: dict[str, Any], n_classes: int, X: np.ndarray, y: np.ndarray,
                                reserved_rows: np.ndarray, count: int, fraction: float,
                                rng: np.random.Generator, n_jobs: int = 1, *, batched: bool = True,
                                max_models: int = MAX_MODELS, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Train ``count`` reference models on random ``fraction`` subsets of ``reserved_rows``.

    LiRA offline (Carlini et al. 2022) / RMIA reference models. With ``batched`` and a spec that
    has a batched recipe, up to ``max_models`` models train in one batched call on ``device``;
    otherwise ``n_jobs`` joblib workers fit them one by one. Subsets and seeds are drawn from
    ``rng`` identically on both paths.

    Returns:
        (conf (n, K): p_y(x) under each reference model, inside (n, K) bool: row in subset k).
    """
    if count < 1:
        raise ValueError(f"ltu.reference_models must be >= 1, got {count}")
    size = max(2, int(round(fraction * len(reserved_rows))))
    subsets = [np.sort(rng.choice(reserved_rows, size=size, replace=False)) for _ in range(count)]
    seeds = rng.integers(0, 2**31 - 1, count)
    recipe = batched_recipe(spec, size, n_classes) if batched else None
    if recipe is not None:
        conf = reference_confidences(recipe, n_classes, X, y, subsets, seeds, max_models=max_models, device=device)
    elif n_jobs == 1:
        conf = np.column_stack([_fit_conf(spec, n_classes, X, y, s, int(sd)) for s, sd in zip(subsets, seeds)])
    else:
        conf = np.column_stack(Parallel(n_jobs=n_jobs)(delayed(_fit_conf)(spec, n_classes, X, y, s, int(sd))
                                                       for s, sd in zip(subsets, seeds)))
    inside = np.zeros((len(y), count), bool)
    for k, s in enumerate(subsets):
        inside[s, k] = True
    return conf, inside


class ReferencePool:
    """Reference-model confidences, released to attackers per round without the hidden r's models.

    Args:
        conf: (n, K) p_y(x) of each reference model (table row order).
        inside: (n, K) bool, row used to train model k.
        usable: (N, K) bool, model k trained without round k's hidden Reserved sample.
    """

    def __init__(self, conf: np.ndarray, inside: np.ndarray, usable: np.ndarray) -> None:
        self.__conf, self.__inside, self.usable = conf, inside, usable

    @property
    def count(self) -> int:
        return self.__conf.shape[1]

    def conf_for_rounds(self, rows: np.ndarray) -> np.ndarray:
        """(N, m, K) confidences of rows (N, m) (or (m,) shared), NaN for a round's unusable models."""
        rows = np.broadcast_to(rows, (len(self.usable),) + np.shape(rows)[-1:]) if np.ndim(rows) == 1 else rows
        c = self.__conf[rows]  # (N, m, K)
        return np.where(self.usable[:, None, :], c, np.nan)

    def evaluator_out_conf(self) -> np.ndarray:
        """(n, K) confidences with NaN where the model was trained on the row.

        Evaluator side only (per-sample ROC / individual scores after the rounds): its NaN
        pattern marks Reserved rows, so attackers must not call it while guessing.
        """
        return np.where(~self.__inside, self.__conf, np.nan)

    def conf_round(self, k: int, rows: np.ndarray) -> np.ndarray:
        """(m, K) confidences of ``rows`` in round k; NaN for models unusable in round k or trained on the row."""
        ok = self.usable[k][None, :] & ~self.__inside[rows]
        return np.where(ok, self.__conf[rows], np.nan)

    def out_for_rounds(self, rows: np.ndarray) -> np.ndarray:
        """(N, m, K) bool: model k usable in round k and not trained on the row."""
        rows = np.broadcast_to(rows, (len(self.usable),) + np.shape(rows)[-1:]) if np.ndim(rows) == 1 else rows
        return self.usable[:, None, :] & ~self.__inside[rows]


