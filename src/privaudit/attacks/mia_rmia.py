"""Offline RMIA (Zarifzadeh, Liu, Mireshghallah & Shokri 2024, "Low-Cost High-Power Membership
Inference Attacks", §3 and the offline approximation of App. B / eq. for Pr(x)).

Likelihood ratio of x against population samples z:
LR(x) = Pr(x | θ) / Pr(x), Pr(x | θ) = p_y(x) under M_D, and offline
Pr(x) = ½ ((1 + a) · mean_out p_y(x) + (1 − a)) from reference models that did not see x
(Reserved-side references, :mod:`privaudit.attacks.mia_reference`). The score is the fraction
of population samples z (the labelled Reserved samples of D_A) with LR(x) / LR(z) ≥ γ.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from privaudit.attacks.ltu import AttackTable, RoundBatch
from privaudit.attacks.ltu_scores import pairwise_guess
from privaudit.attacks.mia_reference import ReferencePool


def offline_pr_x(mean_out: np.ndarray, a: float) -> np.ndarray:
    """Offline Pr(x) ≈ ½((1 + a) · mean_out p_y(x) + (1 − a)); a NaN mean (no out model) counts as 0."""
    m = np.where(np.isnan(mean_out), 0.0, mean_out)
    return 0.5 * ((1 + a) * m + (1 - a))


def rmia_scores(lr_x: np.ndarray, lr_z: np.ndarray, gamma: float) -> np.ndarray:
    """(m,) fraction of population values lr_z (p,) with lr_x / lr_z ≥ γ."""
    z = np.sort(lr_z)
    return np.searchsorted(z, lr_x / gamma, side="right") / max(len(z), 1)


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

    def _lr(self, target: np.ndarray, ref: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no usable out model → Pr(x) = (1 − a)/2
            mean = np.nanmean(ref, axis=-1) if ref.shape[-1] else np.full(ref.shape[:-1], np.nan)
        return target / offline_pr_x(mean, self.a)

    def guess(self, batch: RoundBatch) -> np.ndarray:
        t = batch.table
        self.pool = batch.reference_pool(self.count, self.fraction, self.n_jobs, self.device)
        conf_t = t.proba[np.arange(t.n), t.y]
        out = np.empty((len(batch), 2))
        with np.errstate(all="ignore"):
            for k in range(len(batch)):
                cand = np.array([batch.u1[k], batch.u2[k]])
                pop = batch.labelled_rows(k, "reserved")
                lr_c = self._lr(conf_t[cand], self.pool.conf_round(k, cand))
                lr_z = self._lr(conf_t[pop], self.pool.conf_round(k, pop))
                out[k] = rmia_scores(lr_c, lr_z, self.gamma)
        return pairwise_guess(out[:, 0], out[:, 1])

    def sample_scores(self, table: AttackTable, population: np.ndarray) -> np.ndarray:
        """(n,) evaluator-side scores with each sample's out models against ``population`` rows."""
        if self.pool is None:
            raise ValueError("rmia: sample_scores needs the reference pool of a previous guess()")
        conf_t = table.proba[np.arange(table.n), table.y]
        with np.errstate(all="ignore"):
            lr = self._lr(conf_t, self.pool.evaluator_out_conf())
        return rmia_scores(lr, lr[population], self.gamma)
