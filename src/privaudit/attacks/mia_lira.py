"""Offline LiRA (Carlini et al. 2022, "Membership Inference Attacks From First Principles", §VI-C).

Reference models trained on Reserved-side data only (:mod:`privaudit.attacks.mia_reference`)
give the "out" distribution of the logit-scaled confidence φ(x) = log(p_y / (1 − p_y)) for each
sample; a Gaussian N(μ_out(x), σ²) is fitted (σ pooled over samples: the global-variance
variant recommended for few reference models) and the membership score is the one-sided
likelihood Φ((φ_target(x) − μ_out(x)) / σ): large when M_D is more confident on x than models
that never saw x. In LTU rounds the candidate with the larger score is the guessed member.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from scipy.stats import norm

from privaudit.attacks.ltu import AttackTable, RoundBatch
from privaudit.attacks.mia_reference import ReferencePool
from privaudit.attacks.ltu_scores import pairwise_guess

_EPS = 1e-12


def logit_conf(p: np.ndarray) -> np.ndarray:
    """φ = log(p / (1 − p)) with p clipped to [1e-12, 1 − 1e-12] (any shape)."""
    p = np.clip(p, _EPS, 1 - _EPS)
    return np.log(p) - np.log1p(-p)


def lira_scores(phi_target: np.ndarray, phi_ref: np.ndarray, sigma: float | np.ndarray) -> np.ndarray:
    """Φ((φ_target − nanmean φ_ref) / σ): phi_target (..., m), phi_ref (..., m, K) with NaN = unused."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a sample without usable out model → μ = 0
        mu = np.nanmean(phi_ref, axis=-1)
    mu = np.where(np.isnan(mu), 0.0, mu)
    return norm.cdf((phi_target - mu) / np.maximum(sigma, 1e-6))


def _pooled_sigma(phi_ref: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dev = phi_ref - np.nanmean(phi_ref, axis=-1, keepdims=True)
    s = float(np.sqrt(np.nanmean(dev**2))) if np.isfinite(dev).any() else 1.0
    return s if np.isfinite(s) and s > 0 else 1.0


class LiraAttacker:
    """Offline LiRA with ``count`` reference models on ``fraction`` subsets of D_R."""

    name = "lira"

    def __init__(self, count: int = 8, fraction: float = 0.5, n_jobs: int | Literal["auto"] = 1, device: str = "cpu") -> None:
        self.count, self.fraction, self.n_jobs, self.device = count, fraction, n_jobs, device
        self.pool: ReferencePool | None = None
        self.metrics_extra: dict[str, Any] = {"reference_models": count, "reference_fraction": fraction,
                                              "variant": "offline, global variance"}

    def guess(self, batch: RoundBatch) -> np.ndarray:
        t = batch.table
        self.pool = batch.reference_pool(self.count, self.fraction, self.n_jobs, self.device)
        rows = np.column_stack([batch.u1, batch.u2])                     # (N, 2)
        phi_ref = logit_conf(self.pool.conf_for_rounds(rows))            # (N, 2, K), NaN unusable
        sample = t.rng.choice(t.n, size=min(t.n, 256), replace=False)
        pop = logit_conf(self.pool.conf_for_rounds(sample))              # usable models only
        pop = np.where(self.pool.out_for_rounds(sample), pop, np.nan)
        sigma = _pooled_sigma(pop)
        phi_t = logit_conf(t.proba[rows, t.y[rows]])
        s = lira_scores(phi_t, phi_ref, sigma)
        self.metrics_extra["usable_models_mean"] = float(self.pool.usable.sum(axis=1).mean())
        return pairwise_guess(s[:, 0], s[:, 1])

    def sample_scores(self, table: AttackTable) -> np.ndarray:
        """(n,) evaluator-side scores with each sample's own out models (after :meth:`guess`)."""
        if self.pool is None:
            raise ValueError("lira: sample_scores needs the reference pool of a previous guess()")
        phi_ref = logit_conf(self.pool.evaluator_out_conf())
        return lira_scores(logit_conf(table.proba[np.arange(table.n), table.y]), phi_ref, _pooled_sigma(phi_ref))
