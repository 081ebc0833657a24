"""Black-box one-run privacy audit of any trainer (final model only).

Design (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run",
arXiv:2305.08846, Algorithm 1 with input-space canaries):

1. draw m input-space canary rows (:mod:`privaudit.canaries.input_canaries`, ClipBKD-style rows in
   the low-variance subspace of X);
2. include each canary independently with probability 1/2 (bits S in {0, 1}^m), append the
   included rows to (X, y) in a random row order, and call ``fit`` ONCE;
3. score every canary by its loss under the final model, ``-log p(y_c | x_c)`` (``predict_proba``
   only: black-box);
4. for each (k+, k-) of a grid fixed in advance, guess "included" for the k+ lowest losses and
   "excluded" for the k- highest, abstain on the rest, and count the correct guesses v of r;
5. turn (v, r, m) into an eps lower bound at ``delta`` with the paper's main theorem
   (:func:`privaudit.stats.one_run.one_run_epsilon_lower_bound`, Theorem 3 of arXiv v1 as cited
   there), each grid point at ``level / len(grid)`` and the maximum reported (Bonferroni: the
   paper reports the best of several k, which needs this correction to stay valid).

With ``method="fdp"`` the same counts are also analysed as a test of mu-GDP (Mahloujifar, Melis &
Chaudhuri, "Auditing f-Differential Privacy in One Run", arXiv:2410.22235; implementation,
what was verified and the proof in :mod:`privaudit.stats.fdp_one_run`), giving ``mu_lower_bound``
and its eps at ``delta`` by Dong, Roth & Su (2022) Corollary 2.13 (``eps_lower_bound_fdp``; a
bound on the true eps only for a Gaussian-shaped trade-off curve) and the assumption-free
(eps, delta)-curve version ``eps_lower_bound_fdp_curve``.

Guarantee: for a trainer that really is (eps, delta)-DP with respect to adding/removing one row,
``P(eps_lower_bound > eps) <= level`` and ``P(eps_lower_bound_fdp_curve > eps) <= level``
(``neighbourhood = "add_remove"``), whatever the trainer, data, canaries and score; likewise
``P(mu_lower_bound > mu) <= level`` for a mu-GDP trainer.  Each statistic is valid at ``level`` on
its own: if a decision uses several of them, split level.  The audit's power, not its validity,
depends on the canary design.

Which number to gate an (eps, delta) claim on: ``eps_lower_bound`` (or the curve version).
``eps_lower_bound_fdp`` is the eps at delta of a rejected *Gaussian* curve; a mechanism whose
curve is not Gaussian-shaped can be (eps, delta)-DP and still reject mu-GDP for
``mu = gdp_mu(eps, delta)``: on eps-DP randomized response the GDP eps exceeded the true eps in
91-99.8 % of 1000 runs (benchmark section 3b).  A GDP eps above the claim is evidence against a
GDP-shaped claim (e.g. a GDP/PRV-accounted DP-SGD), not proof against the (eps, delta) claim.
Measured on digits (``benchmarks/results/one_run_digits.txt``): DP-SGD with clipping or noise
removed, claiming eps = 1, gives eps_lower_bound ~ 2 (GDP ~ 3.5) with 160 canaries and one run.

Usage::

    spec = validate_defender_spec({...}, where="defenders[0]")
    res = one_run_audit(lambda X, y, s: make_defender(spec, K).fit(X, y, s), X, y, K,
                        level=0.05, delta=spec_delta, seed=base_seed, method="fdp")
    flagged = res.eps_lower_bound > claimed_epsilon
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Literal, Protocol, Sequence

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.audits.protocol import PURE_DELTA, AuditBound, AuditInputs, AuditRequest, finite_epsilon
from privaudit.claims.claim import claim_family
from privaudit.canaries.input_canaries import INPUT_DESIGNS, LABEL_RULES, cell_capacity, make_input_canaries
from privaudit.canaries.stats_files import UnusableScores, unusable_reason
from privaudit.stats.fdp_claim_one_run import fdp_one_run_family_bound
from privaudit.stats.fdp_one_run import (
    fdp_one_run_epsilon_lower_bound,
    fdp_one_run_mu_lower_bound,
    gdp_epsilon,
)
from privaudit.stats.one_run import one_run_counts, one_run_epsilon_lower_bound
from privaudit.stats.tradeoff import TradeoffFamily
from privaudit.seeding import draw_seed
from privaudit.losses import cross_entropy

__all__ = ["CITATION", "SETTINGS", "OneRunSettings", "DEFAULT_K_GRID", "OneRunResult", "ScoreBounds", "auto_canaries", "bounds_from_losses", "canary_guesses",
           "one_run_audit", "one_run_metrics", "run"]

#: (k+, k-) as fractions of m, fixed in advance; Bonferroni over the grid
DEFAULT_K_GRID: tuple[tuple[float, float], ...] = ((0.05, 0.05), (0.1, 0.1), (0.25, 0.25), (0.5, 0.5))
THREAT_MODEL = "black-box: final model only"
_MAX_AUTO = 1000


class _Model(Protocol):
    def predict_proba(self, X: np.ndarray) -> Any: ...


@dataclass(frozen=True)
class OneRunResult:
    """Outcome of :func:`one_run_audit`.

    Attributes:
        eps_lower_bound: Steinke et al. (eps, delta) lower bound (max over the grid, each at
            level / len(grid)); no assumption on the trainer beyond (eps, delta)-DP.
        eps_lower_bound_fdp: eps at ``delta`` of the largest rejected mu-GDP curve (method "fdp"),
            else None; lower-bounds the true eps at delta ONLY for Gaussian-shaped trade-off
            curves — never gate an (eps, delta) claim on it (see the module docstring).
        mu_lower_bound: largest mu rejected for mu-GDP (method "fdp"), else None.
        eps_lower_bound_fdp_curve: largest eps whose (eps, delta)-DP trade-off curve the f-DP
            analysis rejects (method "fdp"), else None; assumption-free.
        delta, level, method, neighbourhood, threat_model, runs: what was audited and how.
        canaries: m; included: how many canaries were in the training set.
        guesses, correct, k_plus, k_minus: counts of the grid point that gave ``eps_lower_bound``.
        grid: per grid point ``(k_plus, k_minus, correct, eps, mu or None)``.
        design: description of the canaries, the score and the grid.
        seconds: wall time of the audit (training included).
    """

    eps_lower_bound: float
    eps_lower_bound_fdp: float | None
    mu_lower_bound: float | None
    eps_lower_bound_fdp_curve: float | None
    delta: float
    level: float
    method: str
    canaries: int
    included: int
    guesses: int
    correct: int
    k_plus: int
    k_minus: int
    design: str
    grid: tuple[tuple[int, int, int, float, float | None], ...] = field(repr=False)
    seconds: float = 0.0
    neighbourhood: str = Neighbourhood.ADD_REMOVE
    threat_model: str = THREAT_MODEL
    runs: int = 1

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["grid"] = [list(g) for g in self.grid]
        return out


def auto_canaries(d: int, n_classes: int, tail_dim: int | None = None) -> int:
    """``canaries="auto"``: one canary per (tail direction, label) cell, at least 100, at most 1000.

    For digits (d = 64, 10 classes, tail_dim 16) this is 160, the setting measured in
    ``benchmarks/results/one_run_digits.txt`` (more canaries than cells reuse cells and interfere).
    """
    return int(min(_MAX_AUTO, max(100, cell_capacity(d, n_classes, tail_dim))))


def canary_guesses(losses: np.ndarray, k_plus: int, k_minus: int) -> np.ndarray:
    """+1 for the k+ lowest losses, -1 for the k- highest, 0 elsewhere (ties broken by index)."""
    m = losses.shape[0]
    if k_plus + k_minus > m:
        raise ValueError(f"k_plus + k_minus must be <= {m}, got {k_plus} + {k_minus}")
    order = np.argsort(losses, kind="stable")
    g = np.zeros(m, dtype=np.int64)
    g[order[:k_plus]] = 1
    if k_minus:
        g[order[m - k_minus:]] = -1
    return g


@dataclass(frozen=True)
class ScoreBounds:
    """The statistics of one run from canary losses and inclusion bits (see :func:`bounds_from_losses`)."""

    eps_lower_bound: float
    eps_lower_bound_fdp: float | None
    mu_lower_bound: float | None
    eps_lower_bound_fdp_curve: float | None
    guesses: int
    correct: int
    k_plus: int
    k_minus: int
    grid: tuple[tuple[int, int, int, float, float | None], ...]


@lru_cache(maxsize=4096)
def _steinke(v: int, r: int, m: int, delta: float, level: float) -> float:
    return one_run_epsilon_lower_bound(v, r, m, delta, level=level)


@lru_cache(maxsize=4096)
def _gdp_mu(v: int, r: int, m: int, level: float) -> float:
    return fdp_one_run_mu_lower_bound(v, r, m, level=level)


@lru_cache(maxsize=4096)
def _curve(v: int, r: int, m: int, delta: float, level: float) -> float:
    return fdp_one_run_epsilon_lower_bound(v, r, m, delta, level=level, curve="eps_delta")


def _family_curve(v: int, r: int, m: int, delta: float, level: float, family: TradeoffFamily | None) -> float:
    """The f-DP bound against the claim's own family (:func:`fdp_one_run_family_bound`); the (ε, δ) curve
    when no family is given."""
    if family is None:
        return _curve(v, r, m, delta, level)
    return fdp_one_run_family_bound(v, r, m, delta, family, level=level)[1]


def _check_grid(k_grid: Any) -> tuple[tuple[float, float], ...]:
    try:
        grid = tuple((float(a), float(b)) for a, b in k_grid)
    except (TypeError, ValueError):
        raise ValueError(f"k_grid must be a sequence of (k_plus, k_minus) fractions of canaries, "
                         f"got {k_grid!r}") from None
    if not grid or any(not (0 <= a and 0 <= b and 0 < a + b <= 1) for a, b in grid):
        raise ValueError(f"k_grid entries must be fractions (k_plus, k_minus) >= 0 with 0 < k_plus + k_minus <= 1, "
                         f"got {k_grid!r}")
    return grid


def bounds_from_losses(losses: np.ndarray, included: np.ndarray, *, delta: float, level: float,
                       method: str = "steinke", k_grid: Sequence[tuple[float, float]] = DEFAULT_K_GRID,
                       family: TradeoffFamily | None = None) -> ScoreBounds:
    """Steps 4-5 of the module docstring: guesses on a fixed (k+, k-) grid, Bonferroni over it.

    Args:
        losses: (m,) canary scores, low = "looks included" (any statistic of the output).
        included: (m,) 0/1 inclusion bits, independent Bernoulli(1/2).
        delta, level, method, k_grid: as in :func:`one_run_audit`.

    ``eps_lower_bound`` = max over the grid of :func:`one_run_epsilon_lower_bound` at
    ``level / len(grid)``; with ``method="fdp"`` also ``mu_lower_bound`` (max over the grid of
    :func:`fdp_one_run_mu_lower_bound`), its eps at delta, and the f-DP bound against ``family`` (the
    claim's own curves, :mod:`privaudit.stats.tradeoff`; default the (eps, delta) curve).
    """
    losses = np.asarray(losses, dtype=np.float64)
    inc = np.asarray(included).astype(np.int64)
    if losses.ndim != 1 or inc.shape != losses.shape or losses.size < 1 or not np.all(np.isfinite(losses)):
        raise ValueError(f"losses must be finite and 1-D with one entry per inclusion bit, got {losses.shape} "
                         f"and {inc.shape}")
    if method not in ("steinke", "fdp"):
        raise ValueError(f"method must be 'steinke' or 'fdp', got {method!r}")
    grid = _check_grid(k_grid)
    m = losses.size
    level_g = float(level) / len(grid)
    rows: list[tuple[int, int, int, float, float | None]] = []
    best = (-1.0, 0, 0, 0, 0)
    mu_best: float | None = None
    curve_best: float | None = None
    for fp, fm in grid:
        kp, km = int(round(fp * m)), int(round(fm * m))
        if kp + km == 0:
            continue
        v, r, _ = one_run_counts(inc, canary_guesses(losses, kp, km))
        eps = _steinke(v, r, m, float(delta), level_g)
        mu = None
        if method == "fdp":
            mu = _gdp_mu(v, r, m, level_g)
            curve = _family_curve(v, r, m, float(delta), level_g, family)
            mu_best = mu if mu_best is None else max(mu_best, mu)
            curve_best = curve if curve_best is None else max(curve_best, curve)
        rows.append((kp, km, v, eps, mu))
        if eps > best[0]:
            best = (eps, v, r, kp, km)
    eps_fdp = gdp_epsilon(mu_best, delta) if mu_best is not None else None
    return ScoreBounds(eps_lower_bound=float(max(best[0], 0.0)), eps_lower_bound_fdp=eps_fdp,
                       mu_lower_bound=mu_best, eps_lower_bound_fdp_curve=curve_best, guesses=int(best[2]),
                       correct=int(best[1]), k_plus=int(best[3]), k_minus=int(best[4]), grid=tuple(rows))


def _validate(fit: Any, X: Any, y: Any, n_classes: Any, canaries: Any, level: Any, delta: Any, seed: Any,
              method: Any, k_grid: Any, tail_dim: Any) -> tuple[np.ndarray, np.ndarray, int, int, float, float, int,
                                                 tuple[tuple[float, float], ...]]:
    if not callable(fit):
        raise ValueError(f"fit must be a callable fit(X, y, seed) -> model with predict_proba, "
                         f"got {type(fit).__name__}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    Xa = np.asarray(X)
    if Xa.ndim != 2 or Xa.shape[0] < 2 or Xa.shape[1] < 1 or not np.issubdtype(Xa.dtype, np.number):
        raise ValueError(f"X must be a numeric 2-D (n, d) array with n >= 2, got shape {Xa.shape} dtype {Xa.dtype}")
    if not np.all(np.isfinite(Xa)):
        raise ValueError("X must be finite (no NaN/inf); impute or drop those rows first")
    ya = np.asarray(y)
    if ya.shape != (Xa.shape[0],):
        raise ValueError(f"y must be 1-D with one label per row of X ({Xa.shape[0]}), got shape {ya.shape}")
    if not np.issubdtype(ya.dtype, np.integer) or ya.min() < 0 or ya.max() >= n_classes:
        raise ValueError(f"y must hold integer labels in [0, n_classes={n_classes}); encode labels as 0..K-1")
    if isinstance(canaries, str):
        if canaries != "auto":
            raise ValueError(f"canaries must be an integer >= 10 or 'auto', got {canaries!r}")
        ok_tail = tail_dim is None or (isinstance(tail_dim, (int, np.integer)) and not isinstance(tail_dim, bool))
        m = auto_canaries(Xa.shape[1], int(n_classes), tail_dim if ok_tail else None)
    elif isinstance(canaries, bool) or not isinstance(canaries, (int, np.integer)) or canaries < 10:
        raise ValueError(f"canaries must be an integer >= 10 or 'auto', got {canaries!r}")
    else:
        m = int(canaries)
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)) \
            or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be a number in (0, 1) (the probability of over-claiming), e.g. 0.05, "
                         f"got {level!r}")
    lv = float(level)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)) \
            or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), e.g. the claimed delta 1e-5, got {delta!r}")
    dl = float(delta)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if method not in ("steinke", "fdp"):
        raise ValueError(f"method must be 'steinke' or 'fdp', got {method!r}")
    grid = _check_grid(k_grid)
    return Xa, ya.astype(np.int64), int(n_classes), m, lv, dl, int(seed), grid


def one_run_audit(
    fit: Callable[[np.ndarray, np.ndarray, int], _Model],
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    canaries: int | Literal["auto"] = "auto",
    level: float,
    delta: float = 1e-5,
    seed: int = 0,
    method: Literal["steinke", "fdp"] = "steinke",
    design: str = "tail_cells",
    scale: float = 4.0,
    tail_dim: int | None = None,
    labels: str = "balanced",
    k_grid: Sequence[tuple[float, float]] = DEFAULT_K_GRID,
    family: TradeoffFamily | None = None,
) -> OneRunResult:
    """Audit ``fit`` black-box with one training run (see the module docstring).

    Args:
        fit: ``fit(X, y, seed) -> model`` with ``model.predict_proba(X) -> (n, n_classes)``; e.g.
            ``lambda X, y, s: make_defender(spec, K).fit(X, y, s)`` or a user's
            ``lambda X, y, s: train(X, y, K, s, **options)``.
        X: (n, d) training features (the data the recipe is trained on; canaries are added).
        y: (n,) integer labels in [0, n_classes).
        n_classes: number of classes K >= 2.
        canaries: number m >= 10 of canaries, or "auto" (:func:`auto_canaries`; 160 on digits).
        level: failure probability of the one-sided bound returned: the probability that the reported
            bound exceeds the truth (0 < level < 1); each point of ``k_grid`` gets ``level / len(k_grid)``.
        delta: the delta of the audited (eps, delta) claim (0 < delta < 1).
        seed: all randomness (canaries, inclusion bits, row order, the fit seed) comes from it
            through numpy Generators.
        method: "steinke" (eps lower bound, Steinke et al. 2023) or "fdp" (also the f-DP / GDP
            analysis of Mahloujifar et al.).
        design, scale, tail_dim, labels: the canaries (:func:`make_input_canaries`).
        k_grid: (k+, k-) as fractions of m, fixed before the run (Bonferroni over its length).
        family: the claim's trade-off curves for ``eps_lower_bound_fdp_curve`` (method "fdp"); default the
            (eps, delta) curve at ``delta``.

    Raises:
        ValueError: naming the bad argument, before any training; or if the model's
            ``predict_proba`` returns something that is not (m, n_classes) finite probabilities.
    """
    Xa, ya, K, m, lv, dl, sd, grid = _validate(fit, X, y, n_classes, canaries, level, delta, seed, method, k_grid,
                                                     tail_dim)
    if design not in INPUT_DESIGNS:
        raise ValueError(f"design must be one of {INPUT_DESIGNS}, got {design!r}")
    if labels not in LABEL_RULES:
        raise ValueError(f"labels must be one of {LABEL_RULES}, got {labels!r}")
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0 (canary norm / median row norm), got {scale!r}")
    if tail_dim is not None and (isinstance(tail_dim, bool) or not isinstance(tail_dim, (int, np.integer))
                                 or not 1 <= tail_dim <= Xa.shape[1]):
        raise ValueError(f"tail_dim must be None or an integer in [1, d = {Xa.shape[1]}], got {tail_dim!r}")
    start = time.perf_counter()

    ss = np.random.SeedSequence(sd)
    rng_canary, rng_bits, rng_order, rng_fit = (np.random.default_rng(s) for s in ss.spawn(4))
    can = make_input_canaries(Xa, K, m, rng_canary, design=design, scale=float(scale), tail_dim=tail_dim,
                              labels=labels)
    included = rng_bits.random(m) < 0.5  # independent Bernoulli(1/2) inclusion (Steinke et al., Alg. 1)
    X_train = np.concatenate([Xa.astype(np.float32), can.X[included]])
    y_train = np.concatenate([ya, can.y[included]])
    order = rng_order.permutation(len(y_train))
    fit_seed = draw_seed(rng_fit)
    model = fit(X_train[order], y_train[order], fit_seed)

    predict = getattr(model, "predict_proba", None)
    if not callable(predict):
        raise ValueError(f"fit returned {type(model).__name__}, which has no predict_proba")
    proba = np.asarray(predict(can.X), dtype=np.float64)
    if proba.shape != (m, K):
        raise ValueError(f"model.predict_proba must return probabilities of shape ({m}, {K}), got shape {proba.shape}")
    reason = unusable_reason({"proba": proba}, "one-run canary")
    if reason is not None or np.any(proba < -1e-9):  # the defender is then NOT AUDITED by this audit, not a crash
        raise UnusableScores(reason or f"one-run canary probabilities below 0 (smallest {float(proba.min()):.3g}): "
                                       f"its predict_proba returned no probabilities")
    losses = cross_entropy(proba, can.y)

    b = bounds_from_losses(losses, included, delta=dl, level=lv, method=str(method), k_grid=grid, family=family)
    grid_txt = ", ".join(f"({a:g}, {b:g})" for a, b in grid)
    desc = (f"{can.describe()}; each included w.p. 1/2 ({int(included.sum())} included); score = -log p(y|x) of "
            f"the final model; guess in/out for the k+ lowest / k- highest losses, (k+, k-)/m in "
            f"{{{grid_txt}}}, Bonferroni level/{len(grid)}")
    return OneRunResult(
        eps_lower_bound=b.eps_lower_bound, eps_lower_bound_fdp=b.eps_lower_bound_fdp, mu_lower_bound=b.mu_lower_bound,
        eps_lower_bound_fdp_curve=b.eps_lower_bound_fdp_curve, delta=dl, level=lv, method=str(method), canaries=m,
        included=int(included.sum()), guesses=b.guesses, correct=b.correct, k_plus=b.k_plus, k_minus=b.k_minus,
        design=desc, grid=b.grid, seconds=time.perf_counter() - start,
    )


#: the paper and equation of the bound (the f-DP numbers beside it are diagnostics)
CITATION = ("Steinke, Nasr & Jagielski 2023, 'Privacy Auditing with One (1) Training Run' (arXiv:2305.08846), "
            "Algorithm 1 and the main theorem (Theorem 3 of arXiv v1); f-DP view: Mahloujifar, Melis & Chaudhuri "
            "2024 (arXiv:2410.22235)")


@dataclass(frozen=True)
class OneRunSettings:
    """The ``one_run.*`` param the audit reads: the number of input-space canaries (or ``"auto"``)."""

    canaries: int | Literal["auto"]


#: this audit's settings type (:func:`privaudit.audits.protocol.settings_from`)
SETTINGS = OneRunSettings


def run(request: AuditRequest, inputs: AuditInputs, settings: OneRunSettings) -> AuditBound:
    """The one-run black-box audit of one defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    Input-space canaries are appended to the Defender set as ordinary rows, so any trainer kind
    accepts them. The gated value is ``eps_lower_bound`` (Steinke et al.'s theorem, no assumption
    on the trainer); the f-DP numbers are shown beside it. ``settings``: the ``one_run`` params
    block (``canaries``).
    """
    data = inputs.need_defender_data("one_run")
    delta = request.delta(Neighbourhood.ADD_REMOVE)
    make = request.trainer(data.n_classes)
    family = _family(request)
    try:
        res = one_run_audit(lambda Xc, yc, s: make().fit(Xc, yc, s), data.X, data.y, data.n_classes,
                            canaries=settings.canaries, level=request.level, delta=max(delta, PURE_DELTA),
                            seed=request.int_seed("one_run"), method="fdp", family=family)
    except UnusableScores as exc:
        raise UnusableScores(f"defender {request.name!r}: {exc}") from None
    block = one_run_metrics(res, delta=delta, level=request.level)
    # the gated bound (Steinke et al.) tests the (ε, δ) point; the f-DP view beside it tests the claim's own curve
    block["curve"] = "eps_delta"
    block["fdp_curve"] = family.name
    block.update(detectable_one_run(request.claim_for(Neighbourhood.ADD_REMOVE), canaries=int(block["canaries"]),
                                    level=request.level, delta=max(delta, PURE_DELTA)))
    claimed = request.claim.epsilon if request.claim else None
    line = (f"one_run: {request.name}: eps_hat={block['eps_lower_bound']:.3f} at delta={block['delta']:.3g} "
            f"({block['correct']}/{block['guesses']} guesses right, {block['canaries']} canaries); claimed {claimed}")
    return AuditBound(epsilon=res.eps_lower_bound, level=request.level, delta=delta, neighbourhood=res.neighbourhood,
                      threat_model=res.threat_model, diagnostics=block, lines=(line,))


def _family(request: AuditRequest) -> TradeoffFamily:
    """The claim's own trade-off curves the f-DP view tests (at the audited δ, at least :data:`PURE_DELTA`)."""
    return claim_family(request.claim_for(Neighbourhood.ADD_REMOVE),
                        max(request.delta(Neighbourhood.ADD_REMOVE), PURE_DELTA))


def work_besides_fits(request: AuditRequest, canaries: int, rng: np.random.Generator) -> None:
    """This audit's work for one defender besides its training run, on synthetic canary scores: the bounds over
    the guess grid against the claim's own curves (:func:`bounds_from_losses`; for a DP-SGD claim most of the
    time goes to the privacy-loss distributions of the subsampled Gaussian, about 1.4 s in a fresh process) and
    the detectable ε (:func:`detectable_one_run`). What the plan times before the stage's first run
    (:mod:`privaudit.audits.one_run_work`); the scores are those of a trainer that leaks a little (included
    canaries score 0.3 standard deviations lower)."""
    delta = max(request.delta(Neighbourhood.ADD_REMOVE), PURE_DELTA)
    included = rng.integers(0, 2, int(canaries))
    losses = rng.normal(0.0, 1.0, int(canaries)) - 0.3 * included
    bounds_from_losses(losses, included, delta=delta, level=request.level, method="fdp", family=_family(request))
    detectable_one_run(request.claim_for(Neighbourhood.ADD_REMOVE), canaries=int(canaries), level=request.level,
                       delta=delta)


def detectable_one_run(claim: Any, *, canaries: int, level: float, delta: float) -> dict[str, Any]:
    """``detectable_epsilon`` of the gated one-run bound at ``canaries`` (the audit's own guess grid, Bonferroni
    over it): the smallest pure ε an ideal guesser detects with probability >= 0.8
    (:func:`privaudit.stats.detectable.detectable_epsilon_one_run`); ``None`` without a finite claim."""
    from privaudit.stats.detectable import detectable_epsilon_one_run

    if claim is None or not math.isfinite(claim.epsilon):
        return {"detectable_epsilon": None}
    eps = detectable_epsilon_one_run(claimed_epsilon=float(claim.epsilon), canaries=canaries, level=level,
                                     delta=delta, k_grid=DEFAULT_K_GRID)
    return {"detectable_epsilon": eps if math.isfinite(eps) else None,
            "detectable_meaning": "smallest true pure epsilon this audit's canaries detect with probability >= 0.8 "
                                  "for an ideal guesser (randomized response of the inclusion bits): a lower bound on "
                                  "what a real trainer needs (privaudit.stats.detectable)"}


def one_run_metrics(res: OneRunResult, *, delta: float, level: float) -> dict[str, Any]:
    """The ``one_run`` block of ``metrics/audit.json`` for a :class:`OneRunResult`
    computed for a claim at ``delta`` (add/remove) and budget share ``level``."""
    # wall time is not a metric: it would make metrics/audit.json differ between identical runs
    block = {k: v for k, v in res.as_dict().items() if k not in ("grid", "seconds")}
    block.update(eps_lower_bound=finite_epsilon(res.eps_lower_bound)[0], delta=delta, level=level,
                 grid=[list(g) for g in res.grid])
    # the GDP-shaped number is not a bound on an (ε, δ) claim: keep it out of the eps_* namespace
    block["gdp_epsilon"] = block.pop("eps_lower_bound_fdp", None)
    if block.get("eps_lower_bound_fdp_curve") is not None:
        block["eps_lower_bound_fdp_curve"] = finite_epsilon(block["eps_lower_bound_fdp_curve"])[0]
    return block
