"""The trainer-based LTU attacker (Pedersen et al. 2022, Fig. 2 branch (3); Theorem 3).

Per round the attacker trains two mock Defender models with the same trainer T_D (the
defender spec, including its public ``random_state``): M_1 on (D_D − {d}) ∪ {u1} and M_2 on
(D_D − {d}) ∪ {u2}, the candidate placed in the hidden sample's slot of the public training
order. The mock whose predictions on all of D_A are closer (mean L1 distance of probability
vectors) to M_D's wins. The trainer's secret randomness (random order / random seed of the
"shuffled"/"unseeded" levels) is unknown to the attacker, which draws its own. With a
deterministic, order-invariant (or order-replaying) trainer one mock *is* M_D, so A_ltu = 1.

Mock trainings run in parallel with joblib (chunks of rounds per worker, one BLAS/torch
thread each so that workers do not oversubscribe the cores).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import Parallel, delayed

from privaudit.attacks.ltu import RoundBatch


def _mock_distances(spec: dict[str, Any], n_classes: int, X: np.ndarray, y: np.ndarray, proba: np.ndarray,
                    jobs: list[tuple[np.ndarray, int, int, int]]) -> list[tuple[float, float]]:
    """For each (train_rows with −1 slot, u1, u2, seed): distances of the two mocks to M_D."""
    from threadpoolctl import threadpool_limits

    from privaudit.defenders.registry import make_defender

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = []
    with threadpool_limits(1):
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
    torch.set_num_threads(threads)
    return out


#: mean L1 distance below which a mock counts as identical to M_D ("exact_match_rounds")
EXACT_ATOL = 1e-6


class RetrainAttacker:
    """Mock-defender attacker; ``n_jobs`` joblib workers (−1 = all cores)."""

    name = "retrain"

    def __init__(self, n_jobs: int = 2) -> None:
        self.n_jobs = n_jobs
        self.metrics_extra: dict[str, Any] = {}

    def distances(self, batch: RoundBatch) -> np.ndarray:
        """(N, 2) distances of the two mocks to M_D for every round."""
        t = batch.table
        if t.spec is None:
            raise ValueError("the retrain attacker needs the defender spec (T_D)")
        if t.X.shape[1] == 0:
            raise ValueError("the retrain attacker needs the features (run the ltu stage with --features)")
        seeds = t.rng.integers(0, 2**31 - 1, len(batch))
        jobs = [(batch.train_order(k), int(batch.u1[k]), int(batch.u2[k]), int(seeds[k])) for k in range(len(batch))]
        n_chunks = max(1, min(len(jobs), 4 * (self.n_jobs if self.n_jobs > 0 else 8)))
        chunks = [c for c in np.array_split(np.arange(len(jobs)), n_chunks) if len(c)]
        if self.n_jobs == 1:
            res = [_mock_distances(t.spec, t.n_classes, t.X, t.y, t.proba, [jobs[i] for i in c]) for c in chunks]
        else:
            res = Parallel(n_jobs=self.n_jobs)(
                delayed(_mock_distances)(t.spec, t.n_classes, t.X, t.y, t.proba, [jobs[i] for i in c]) for c in chunks
            )
        return np.array([d for part in res for d in part], dtype=np.float64)

    def guess(self, batch: RoundBatch) -> np.ndarray:
        dist = self.distances(batch)
        # identical up to float32 round-off of predicting on the permuted table (row-blocked GEMM)
        exact = dist.min(axis=1) < EXACT_ATOL
        self.metrics_extra = {"distance": "mean L1 of predict_proba on D_A",
                              "exact_match_rounds": int(exact.sum()),
                              "mean_distance_gap": float(np.abs(dist[:, 0] - dist[:, 1]).mean())}
        return np.where(dist[:, 0] < dist[:, 1], 1.0, np.where(dist[:, 0] > dist[:, 1], 0.0, 0.5))
