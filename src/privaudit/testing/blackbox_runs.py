"""Many-run black-box audit of a training recipe from its final models (issue 26).

Threat model: the auditor sees only the final model's ``predict_proba`` (black-box, last iterate)
and chooses one training example (the canary; add/remove neighbourhood: the runs train on D or on
D ∪ {canary}). ``runs_in`` runs train with the canary, ``runs_out`` without it, each from its own
seed; every final model gets one score (:mod:`privaudit.canaries.crafted`). A share
``tune_fraction`` of each side only chooses the threshold; the rest certifies it
(:mod:`privaudit.stats.gdp_runs`): an assumption-free ε lower bound and, under the stated GDP
assumption, ``eps_lower_bound`` (Nasr et al. 2023 §5's GDP conversion of a Clopper-Pearson-bounded
(FPR, FNR) point). For DP-SGD recipes the last-iterate heuristic ceiling (Steinke et al. 2024) is
reported next to it.

Two drivers, one statistic:

* :func:`audit_batched_recipe`: recipes of the batched trainer (:func:`privaudit.train.train_heads`,
  ``kind: dp_sgd`` / ``torch_mlp`` via :func:`privaudit.defenders.recipes.recipe_from_spec`), thousands of runs
  in blocks.
* :func:`audit_trainer`: any function ``train(X, y, seed) -> model with predict_proba`` run
  sequentially, one model per run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from numpy.typing import NDArray

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.canaries.blackbox_trials import batched_canary_scores
from privaudit.canaries.crafted import CraftedCanary, ProbaModel, craft_canary, score_model
from privaudit.stats.gdp_runs import GdpRunsBound, LastIterateCeiling, certify_scores, last_iterate_epsilon
from privaudit.train import HeadRecipe

__all__ = ["BlackboxAuditConfig", "BlackboxAuditResult", "audit_batched_recipe", "audit_trainer", "certify_scores"]

THREAT_MODEL = "final model, black-box predict_proba (two queries per model)"
NEIGHBOURHOOD = Neighbourhood.ADD_REMOVE


@dataclass(frozen=True, kw_only=True)
class BlackboxAuditConfig:
    """Knobs of one audit (keyword arguments only). ``runs_in``/``runs_out``: trained models with /
    without the canary. ``level``: failure probability of each bound the audit returns (required)."""

    runs_in: int = 4000
    runs_out: int = 4000
    tune_fraction: float = 0.2
    level: float
    delta: float = 1e-5
    seed: int = 0
    scale: float | None = None
    margin: float = 3.0
    label: int | None = None
    block: int = 1000

    def __post_init__(self) -> None:
        for name in ("runs_in", "runs_out"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 4:
                raise ValueError(f"{name} must be an integer >= 4 (tuning and certification runs), got {v!r}")
        if not (0.0 < self.tune_fraction < 1.0):
            raise ValueError(f"tune_fraction must lie in (0, 1), got {self.tune_fraction!r}")
        if not (0.0 < self.level < 1.0):
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")
        if not (0.0 < self.delta < 1.0):
            raise ValueError(f"delta must lie in (0, 1), got {self.delta!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.block, int) or self.block < 2:
            raise ValueError(f"block must be an integer >= 2 (models per batched call), got {self.block!r}")
        for name in ("runs_in", "runs_out"):
            n = getattr(self, name)
            if int(n * self.tune_fraction) < 1 or n - int(n * self.tune_fraction) < 1:
                raise ValueError(f"{name}={n} leaves no tuning or no certification runs at "
                                 f"tune_fraction={self.tune_fraction}; raise {name}")


@dataclass(frozen=True)
class BlackboxAuditResult:
    """ε lower bounds of one audit, with everything needed to read them."""

    eps_lower_bound: float
    """GDP view: ε of μ_L at δ (assumption: the recipe's trade-off curve is Gaussian)."""
    eps_lower_bound_rate: float
    """assumption-free (ε, δ) bound from the same kind of test (its own threshold, its own level)."""
    mu_lower_bound: float
    mu_point: float
    gdp: GdpRunsBound
    rate: GdpRunsBound
    runs_in: int
    runs_out: int
    tuning_in: int
    tuning_out: int
    level: float
    delta: float
    canary: str
    ceiling: LastIterateCeiling | None
    seconds: float
    seed: int
    neighbourhood: str = NEIGHBOURHOOD
    threat_model: str = THREAT_MODEL
    assumption: str = ("eps_lower_bound: the recipe's trade-off curve (canary in vs out) is Gaussian, mu-GDP for "
                       "some mu (Dong, Roth & Su 2022; the GDP conversion of Nasr et al. 2023); runs independent. "
                       "eps_lower_bound_rate: runs independent only. Each holds with probability >= 1 - level.")
    scores_in: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0), repr=False)
    scores_out: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0), repr=False)


def _result(s_in: NDArray[np.float64], s_out: NDArray[np.float64], cfg: BlackboxAuditConfig, canary: CraftedCanary,
            ceiling: LastIterateCeiling | None, seconds: float) -> BlackboxAuditResult:
    g, r, ti, to = certify_scores(s_in, s_out, tune_fraction=cfg.tune_fraction, level=cfg.level, delta=cfg.delta)
    return BlackboxAuditResult(
        eps_lower_bound=g.eps_lower_bound_gdp, eps_lower_bound_rate=r.eps_lower_bound_rate,
        mu_lower_bound=g.mu_lower_bound, mu_point=g.mu_point, gdp=g, rate=r, runs_in=int(s_in.size),
        runs_out=int(s_out.size), tuning_in=ti, tuning_out=to, level=cfg.level, delta=cfg.delta,
        canary=canary.describe(), ceiling=ceiling, seconds=seconds, seed=cfg.seed, scores_in=s_in, scores_out=s_out)


def _check_data(X: NDArray[Any], y: NDArray[Any], n_classes: int) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    return X, y


def audit_batched_recipe(X: NDArray[Any], y: NDArray[Any], n_classes: int, recipe: HeadRecipe,
                         config: BlackboxAuditConfig, *,
                         canary: CraftedCanary | None = None) -> BlackboxAuditResult:
    """Audit a batched-trainer recipe (DP-SGD or SGD heads) on (X, y) from its final models.

    Blocks of ``config.block`` models (half with the canary) are trained by :func:`train_heads`,
    block b from ``torch.Generator().manual_seed(seed_b)``, seeds from
    ``np.random.SeedSequence(config.seed)``. The trainer runs on the CPU with the caller's torch
    thread count.
    """
    X, y = _check_data(X, y, n_classes)
    t0 = time.perf_counter()
    clip = recipe.dp.max_grad_norm if recipe.dp is not None else 1.0
    if canary is None:
        canary = craft_canary(X, y, n_classes, scale=config.scale, label=config.label, clip_norm=clip,
                              margin=config.margin)
    need_in, need_out = config.runs_in, config.runs_out
    seeds = np.random.SeedSequence(config.seed)
    Xb, yb = torch.from_numpy(X), torch.from_numpy(y)
    s_in: list[NDArray[np.float64]] = []
    s_out: list[NDArray[np.float64]] = []
    while need_in > 0 or need_out > 0:
        m_in = min(need_in, config.block // 2) if need_out > 0 else min(need_in, config.block)
        m_out = min(need_out, config.block - m_in)
        valid = torch.zeros(m_in + m_out, dtype=torch.bool)
        valid[:m_in] = True
        seed = int(seeds.spawn(1)[0].generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
        sc = batched_canary_scores(recipe, Xb, yb, n_classes, canary, valid, torch.Generator().manual_seed(seed))
        s_in.append(sc[:m_in])
        s_out.append(sc[m_in:])
        need_in -= m_in
        need_out -= m_out
    ceiling = None
    if recipe.dp is not None:
        ceiling = last_iterate_epsilon(recipe.dp.noise_multiplier, recipe.dp.sample_rate, recipe.dp.steps, config.delta)
    return _result(np.concatenate(s_in), np.concatenate(s_out), config, canary, ceiling, time.perf_counter() - t0)


Trainer = Callable[[NDArray[np.float32], NDArray[np.int64], int], ProbaModel]


def audit_trainer(train: Trainer, X: NDArray[Any], y: NDArray[Any], n_classes: int,
                  config: BlackboxAuditConfig, *, canary: CraftedCanary | None = None,
                  clip_norm: float = 1.0, ceiling: LastIterateCeiling | None = None) -> BlackboxAuditResult:
    """Audit any trainer ``train(X, y, seed) -> model`` (``model.predict_proba``) from its final models.

    Run i trains on (X, y) (out) or on (X, y) with the canary row appended (in), in the order
    in, out, in, out, … (then the longer side), with seed ``SeedSequence(config.seed)``'s i-th
    spawned 63-bit integer. ``clip_norm``: the recipe's clip norm C, used only to size the canary.
    """
    X, y = _check_data(X, y, n_classes)
    t0 = time.perf_counter()
    if canary is None:
        canary = craft_canary(X, y, n_classes, scale=config.scale, label=config.label, clip_norm=clip_norm,
                              margin=config.margin)
    X_in = np.vstack([X, canary.x[None, :]]).astype(np.float32)
    y_in = np.concatenate([y, [canary.label]]).astype(np.int64)
    order = [True, False] * min(config.runs_in, config.runs_out)
    order += [config.runs_in > config.runs_out] * abs(config.runs_in - config.runs_out)
    seeds = np.random.SeedSequence(config.seed).spawn(len(order))
    s_in: list[float] = []
    s_out: list[float] = []
    for inc, ss in zip(order, seeds):
        seed = int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
        model = train(X_in, y_in, seed) if inc else train(X, y, seed)
        sc = score_model(model, canary)
        if not math.isfinite(sc):
            raise ValueError(f"the trainer's model gave a non-finite canary score {sc!r} (seed {seed}); "
                             "check that predict_proba returns finite probabilities")
        (s_in if inc else s_out).append(sc)
    return _result(np.array(s_in), np.array(s_out), config, canary, ceiling, time.perf_counter() - t0)
