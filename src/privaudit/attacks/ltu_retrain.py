"""The trainer-based LTU attacker (Pedersen et al. 2022, Fig. 2 branch (3); Theorem 3).

Per round the attacker trains two mock Defender models with the same trainer T_D (the
defender spec, including its public ``random_state``): M_1 on (D_D − {d}) ∪ {u1} and M_2 on
(D_D − {d}) ∪ {u2}, the candidate placed in the hidden sample's slot of the public training
order. The mock whose predictions on all of D_A are closer (mean L1 distance of probability
vectors) to M_D's wins. The trainer's secret randomness (random order / random seed of the
"shuffled"/"unseeded" levels) is unknown to the attacker, which draws its own. With a
deterministic, order-invariant (or order-replaying) trainer one mock *is* M_D, so A_ltu = 1.

Defenders with a batched recipe (``kind: torch_mlp`` / ``dp_sgd``) train the mocks of up to
``max_models // 2`` rounds in one call of the batched trainer
(:func:`privaudit.attacks.batched_mocks.retrain_distances`; with ``randomness: fixed`` the
mocks replay the public order, so Theorem 3 stays exact up to float round-off). Other kinds
train mocks in parallel on worker processes (:mod:`privaudit.repro.worker_pool`; chunks of rounds per worker, one
BLAS/torch thread each so that workers do not oversubscribe the cores).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from joblib import cpu_count

from privaudit.attacks.batched_mocks import MAX_MODELS, batched_recipe, retrain_distances
from privaudit.attacks.ltu import RoundBatch
from privaudit.attacks.mia_reference import joblib_jobs
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.seeding import draw_seeds
from privaudit.repro.worker_pool import map_in_processes


def _mock_distances(spec: DefenderSpecBase, n_classes: int, X: np.ndarray, y: np.ndarray, proba: np.ndarray,
                    jobs: list[tuple[np.ndarray, int, int, int]]) -> list[tuple[float, float]]:
    """For each (train_rows with −1 slot, u1, u2, seed): distances of the two mocks to M_D."""
    from privaudit.defenders.registry import make_defender
    from privaudit.repro.threads import one_thread

    out = []
    with one_thread():
        for rows, u1, u2, seed in jobs:
            dists = []
            slot = int(np.flatnonzero(rows < 0)[0])
            for j, u in enumerate((u1, u2)):
                r = rows.copy()
                r[slot] = u
                mock = make_defender(spec, n_classes=n_classes, device="cpu")
                mock.fit(X[r], y[r], seed=int(seed) + j)
                dists.append(float(np.abs(mock.predict_proba(X) - proba).sum(axis=1).mean()))
            out.append((dists[0], dists[1]))
    return out


#: mean L1 distance below which a mock counts as identical to M_D ("exact_match_rounds")
EXACT_ATOL = 1e-6

#: a batched ``fixed`` round is certified when one mock is within EXACT_ATOL of M_D and the other
#: at least this far: the batched replay then decides as the sequential one (see RetrainAttacker)
CERTIFY_GAP = 1e-4


class RetrainAttacker:
    """Mock-defender attacker.

    Batched path (specs with a batched recipe: ``torch_mlp`` / ``dp_sgd``): all mocks of
    ``max_models // 2`` rounds train in one call of the batched trainer. For ``randomness:
    fixed`` (deterministic, public data order) Theorem 3 needs the member's mock to *be* M_D; the
    batched trainer replays :class:`~privaudit.defenders.torch_head.TorchMLPDefender` only up to
    float32 round-off (batched GEMMs, hand-derived gradients), which long MLP trainings amplify
    (measured on digits, 800 rows, hidden [64], 30 epochs, batch 32: the member's batched mock is
    up to 2e-4 mean-L1 from M_D, the other mock at least 7e-4 away). So a ``fixed`` round is
    kept from the batched pass only when certified (closer mock < ``EXACT_ATOL``, other mock
    >= ``CERTIFY_GAP``); the other rounds are retrained exactly with ``make_defender`` (same
    seeds as the sequential path), which keeps A_ltu = 1 exact. ``last_batched_rounds`` holds
    how many rounds the batched pass decided in the last call.

    Args:
        n_jobs: worker processes for the sequential path (−1 or ``auto``: every core).
        batched: use the batched trainer when the spec has a recipe (torch_mlp / dp_sgd).
        max_models: at most this many mocks per batched call (memory chunk, >= 2).
        device: torch device of the batched path.
    """

    name = "retrain"

    def __init__(self, n_jobs: int | Literal["auto"] = 2, batched: bool = True, max_models: int = MAX_MODELS,
                 device: str = "cpu") -> None:
        if int(max_models) < 2:
            raise ValueError(f"max_models must be >= 2, got {max_models}")
        self.n_jobs = joblib_jobs(n_jobs)
        self.batched, self.max_models, self.device = batched, int(max_models), device
        self.metrics_extra: dict[str, Any] = {}
        self.last_batched_rounds = 0

    def distances(self, batch: RoundBatch) -> np.ndarray:
        """(N, 2) distances of the two mocks to M_D for every round."""
        t = batch.table
        if t.spec is None:
            raise ValueError("the retrain attacker needs the defender spec (T_D)")
        if t.X.shape[1] == 0:
            raise ValueError("the retrain attacker needs the features (run the ltu stage with --features)")
        seeds = draw_seeds(t.rng, len(batch))
        self.last_batched_rounds = 0
        # a mock trains on n_D rows: D_D with the hidden slot filled by the candidate
        recipe = (batched_recipe(t.spec, len(batch.train_order(0)), t.n_classes)
                  if self.batched and len(batch) else None)
        if recipe is None:
            return self._sequential(batch, seeds, np.arange(len(batch)))
        orders = np.stack([batch.train_order(k) for k in range(len(batch))])
        dist = retrain_distances(recipe, t.n_classes, t.X, t.y, t.proba, orders, batch.u1, batch.u2, seeds,
                                 max_models=self.max_models, device=self.device)
        if not recipe.shuffle and recipe.dp is None:  # fixed: keep only certified rounds (Theorem 3)
            ok = (dist.min(axis=1) < EXACT_ATOL) & (dist.max(axis=1) >= CERTIFY_GAP)
            redo = np.flatnonzero(~ok)
            if len(redo):
                dist[redo] = self._sequential(batch, seeds, redo)
            self.last_batched_rounds = int(ok.sum())
        else:
            self.last_batched_rounds = len(batch)
        return dist

    def _sequential(self, batch: RoundBatch, seeds: np.ndarray, ks: np.ndarray) -> np.ndarray:
        """(len(ks), 2) distances of rounds ``ks``, mocks fitted one by one (worker processes)."""
        t = batch.table
        jobs = [(batch.train_order(k), int(batch.u1[k]), int(batch.u2[k]), int(seeds[k])) for k in ks]
        n_chunks = max(1, min(len(jobs), 4 * (self.n_jobs if self.n_jobs > 0 else cpu_count())))
        chunks = [c for c in np.array_split(np.arange(len(jobs)), n_chunks) if len(c)]
        if self.n_jobs == 1:
            res = [_mock_distances(t.spec, t.n_classes, t.X, t.y, t.proba, [jobs[i] for i in c]) for c in chunks]
        else:
            res = list(map_in_processes(_mock_distances, [([jobs[i] for i in c],) for c in chunks], self.n_jobs,
                                        shared=(t.spec, t.n_classes, t.X, t.y, t.proba)))
        return np.array([d for part in res for d in part], dtype=np.float64).reshape(len(ks), 2)

    def guess(self, batch: RoundBatch) -> np.ndarray:
        dist = self.distances(batch)
        # identical up to float32 round-off of predicting on the permuted table (row-blocked GEMM)
        exact = dist.min(axis=1) < EXACT_ATOL
        self.metrics_extra = {"distance": "mean L1 of predict_proba on D_A",
                              "exact_match_rounds": int(exact.sum()),
                              "mean_distance_gap": float(np.abs(dist[:, 0] - dist[:, 1]).mean())}
        return np.where(dist[:, 0] < dist[:, 1], 1.0, np.where(dist[:, 0] > dist[:, 1], 0.0, 0.5))
