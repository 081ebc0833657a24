"""Offline RMIA (Zarifzadeh, Liu, Mireshghallah & Shokri 2024, "Low-Cost High-Power Membership
Inference Attacks", §3 and the offline approximation of App. B / eq. for Pr(x)).

Likelihood ratio of x against population samples z:
LR(x) = Pr(x | θ) / Pr(x), Pr(x | θ) = p_y(x) under M_D, and offline
Pr(x) = ½ ((1 + a) · mean_out p_y(x) + (1 − a)) from reference models that did not see x
(Reserved-side references, :mod:`privaudit.attacks.mia_reference`). The score is the fraction
of population samples z (the labelled Reserved samples of D_A) with LR(x) / LR(z) ≥ γ.

Cost: a round's population is every labelled Reserved sample, and its LR depends on the round only through which
reference models the round may use (those not trained on its hidden sample). :meth:`RmiaAttacker.guess` computes
the population's LR once per distinct set of usable models (at most 2^K for K models: 8 models give at most 256
for 1 000 rounds) and counts, per round, the population values at most the two candidates' LR / γ instead of
sorting the population: the same numbers as one LR pass and one sort per round
(:func:`privaudit.testing.scoring_reference.rmia_guess_per_round`, compared bit for bit in
``tests/attacks/test_rmia_rounds.py``); 25 000 + 25 000 rows x 1 000 rounds x 8 models in 1.2 s instead of 5.2 s
on 2 CPU cores (``benchmarks/bench_ltu_scoring.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from privaudit.attacks.ltu import AttackTable, RoundBatch
from privaudit.attacks.ltu_scores import pairwise_guess
from privaudit.attacks.mia_reference import ReferencePool


def offline_pr_x(mean_out: np.ndarray, a: float) -> np.ndarray:
    """Offline Pr(x) ≈ ½((1 + a) · mean_out p_y(x) + (1 − a)); a NaN mean (no out model) counts as 0."""
    m = np.where(np.isnan(mean_out), 0.0, mean_out)
    return 0.5 * ((1 + a) * m + (1 - a))


def mean_usable(conf: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Mean of ``conf`` over its last axis where ``ok`` (and ``conf`` is not NaN), NaN where none: the numbers of
    ``np.nanmean(np.where(ok, conf, np.nan), axis=-1)`` (the same zero-filled sum and count), without the NaN
    array in between."""
    ok = ok & ~np.isnan(conf)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, conf, 0.0).sum(axis=-1) / ok.sum(axis=-1)


def rmia_scores(lr_x: np.ndarray, lr_z: np.ndarray, gamma: float) -> np.ndarray:
    """(m,) fraction of population values lr_z (p,) with lr_x / lr_z ≥ γ."""
    z = np.sort(lr_z)
    return np.searchsorted(z, lr_x / gamma, side="right") / max(len(z), 1)


def rmia_scores_few(lr_x: np.ndarray, lr_z: np.ndarray, gamma: float) -> np.ndarray:
    """:func:`rmia_scores` for a few ``lr_x`` (a round's two candidates): one count per value instead of a sort
    of the population, the same numbers. Ordered as ``np.sort`` orders (NaN above every number): a NaN
    ``lr_x / γ`` counts the whole population, a NaN ``lr_z`` only under a NaN."""
    v = lr_x / gamma
    count = np.array([len(lr_z) if np.isnan(t) else np.count_nonzero(lr_z <= t) for t in v.ravel()])
    return count.reshape(v.shape) / max(len(lr_z), 1)


class RmiaAttacker:
    """Offline RMIA with ``count`` Reserved-side reference models; population z = labelled D_R."""

    name = "rmia"

    def __init__(self, count: int = 8, fraction: float = 0.5, a: float = 0.33, gamma: float = 1.0,
                 n_jobs: int | Literal["auto"] = 1, device: str = "cpu") -> None:
        if not 0.0 <= a <= 1.0 or gamma <= 0:
            raise ValueError(f"ltu.rmia_a must lie in [0, 1] and ltu.rmia_gamma > 0, got {a}, {gamma}")
        self.count, self.fraction, self.a, self.gamma, self.n_jobs = count, fraction, a, gamma, n_jobs
        self.device = device
        self.pool: ReferencePool | None = None
        self.metrics_extra: dict[str, Any] = {"reference_models": count, "a": a, "gamma": gamma,
                                              "variant": "offline"}

    def _lr(self, target: np.ndarray, conf: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """LR = p_y(x) / Pr(x) with Pr(x) from the mean of the usable out models' ``conf`` (none: (1 − a)/2)."""
        return target / offline_pr_x(mean_usable(conf, ok), self.a)

    def guess(self, batch: RoundBatch) -> np.ndarray:
        t = batch.table
        self.pool = batch.reference_pool(self.count, self.fraction, self.n_jobs, self.device)
        conf_t = t.proba[np.arange(t.n), t.y]
        out = np.empty((len(batch), 2))
        # rounds that may use the same reference models share their population's LR (module docstring)
        _, group = np.unique(self.pool.usable, axis=0, return_inverse=True)
        group = np.asarray(group).ravel()
        lr_all = np.full(t.n, np.nan)
        with np.errstate(all="ignore"):
            cand = np.stack([batch.u1, batch.u2], axis=1)  # (N, 2): every round's candidates at once
            lr_c = self._lr(conf_t[cand], self.pool.conf_for_rounds(cand), self.pool.out_for_rounds(cand))
            for g in range(int(group.max()) + 1 if len(group) else 0):
                rounds = np.flatnonzero(group == g)
                in_any = np.zeros(t.n, bool)
                for k in rounds:
                    in_any[batch.labelled_rows(int(k), "reserved")] = True
                rows = np.flatnonzero(in_any)
                # any round of the group: its usable models are the group's
                lr_all[rows] = self._lr(conf_t[rows], *self.pool.conf_round_parts(int(rounds[0]), rows))
                for k in rounds:
                    out[k] = rmia_scores_few(lr_c[k], lr_all[batch.labelled_rows(int(k), "reserved")], self.gamma)
        return pairwise_guess(out[:, 0], out[:, 1])

    def sample_scores(self, table: AttackTable, population: np.ndarray) -> np.ndarray:
        """(n,) evaluator-side scores with each sample's out models against ``population`` rows."""
        if self.pool is None:
            raise ValueError("rmia: sample_scores needs the reference pool of a previous guess()")
        conf_t = table.proba[np.arange(table.n), table.y]
        with np.errstate(all="ignore"):
            ref = self.pool.evaluator_out_conf()
            lr = self._lr(conf_t, ref, ~np.isnan(ref))
        return rmia_scores(lr, lr[population], self.gamma)
