"""Measure the LTU stage's work besides fits, for a first plan (before the stage has ever run).

The plan prices the LTU stage's reference and mock fits from the defenders stage's fit timings; the stage's
other work — the attackers' rounds and per-sample scores, and the per-sample risk's calibration and bootstrap —
was unknown until its first run (then the stage's recorded wall is used): at 10 000 x 128 x 10 the first plan
said 15 s for a 24-31 s stage, on digits 3 s for 9 s. This module times that work on this machine with the
library's own code (:func:`privaudit.attacks.ltu_evaluation.evaluate_defender`,
:func:`privaudit.attacks.sample_risk.risk_from_confidences`) on synthetic data of the audit's shapes
(n Defender + n Reserved rows, C classes, the reference models' confidences filled in so that nothing trains):

* the attackers (after a warm-up call of a few rounds) at ``ltu.rounds`` rounds, and the per-sample risk at its
  ``bootstrap`` resamples: the same work as one defender's, measured once. Timing shorter calls and extrapolating
  was tried first (50 and 100 rounds, 0 and 20 resamples): at 10k x 128 two such probes in a row read 1.05 and
  2.07 s for the attackers, 1.17 and 1.93 s for the risk — the difference of two short calls is mostly timing
  noise. Beyond :data:`MAX_PROBE_ROUNDS` rounds or :data:`MAX_PROBE_BOOTSTRAP` resamples the cost is
  extrapolated from calls at half and all of that cap (:func:`scoring_rate`: LiRA's rounds and the bootstrap's
  resamples cost the same each; RMIA computes its population once per distinct set of usable reference models,
  at most 2^K of them, so beyond the cap the line errs on the long side). The plan multiplies by the number of
  defenders (their shapes are the same). At 10k x 128 the probe costs the plan stage about 2 s (3.5 s before RMIA
  and the bootstrap were vectorised, session 55), at 50k x 512 about 7.5 s on 2 cores (17.5 s before), on digits
  under 1 s, and only before the LTU stage's first run.

The white-box ``gradient`` attacker needs the trained model: it is not played here but its one per-sample gradient
pass per defender (1.4-1.6 s for a torch head at 10k x 128) is timed by :func:`time_gradient_pass` on random
weights of each defender's architecture (the cost does not depend on the weights), where the plan knows the
features' dimension. ``retrain`` is left out and said so (its mocks are fits, already priced). Synthetic confidences are not the defender's, so NaN patterns and tail fits differ a little
from the real run; ``benchmarks/results/scale_*`` put the plan's estimate beside the stage's wall.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch, sklearn, scipy load with the attackers, inside the functions
    from privaudit.attacks.ltu_evaluation import AttackerOptions
    from privaudit.attacks.sample_risk import RiskOptions
    from privaudit.defenders.specs import DefenderSpecBase

__all__ = ["MAX_GRADIENT_ROWS", "MAX_PROBE_BOOTSTRAP", "MAX_PROBE_ROUNDS", "NOT_TIMED", "ScoringTime", "scoring_rate",
           "time_gradient_pass", "time_ltu_scoring"]

#: most rounds and bootstrap resamples timed as such; beyond, extrapolated from calls at half and all of it
MAX_PROBE_ROUNDS = 1000
MAX_PROBE_BOOTSTRAP = 200
#: most rows of a timed gradient pass; beyond, extrapolated from half and all of it (the pass runs in chunks of
#: 512 rows: its cost is linear in the rows)
MAX_GRADIENT_ROWS = 4096
#: attackers the probe does not play: their cost is a fit (priced elsewhere) or needs the trained model
NOT_TIMED = frozenset({"retrain", "gradient"})


@dataclass(frozen=True)
class ScoringTime:
    """Seconds of one defender's LTU work besides fits, and how they were measured."""

    seconds: float
    timed_by: str


def scoring_rate(t_short: float, t_long: float, short: int, long: int, full: int) -> float:
    """Seconds of ``full`` units from calls of ``short`` and ``long`` units: ``fixed + full x per_unit``, each
    clipped at 0 against timing noise.

    >>> scoring_rate(0.3 + 50 * 0.002, 0.3 + 100 * 0.002, 50, 100, 1000)
    2.3
    >>> scoring_rate(0.5, 0.4, 50, 100, 1000)  # noise: the longer call was faster
    0.5
    """
    if not 0 <= short < long:
        raise ValueError(f"scoring_rate needs 0 <= short < long, got {short}, {long}")
    per_unit = max(0.0, (t_long - t_short) / (long - short))
    fixed = max(0.0, t_short - short * per_unit)
    return round(fixed + full * per_unit, 9)


def _measured(call: Callable[[int], float], units: int, cap: int) -> float:
    """Seconds of ``call(units)``: timed as such up to ``cap``, else extrapolated from ``cap // 2`` and ``cap``."""
    if units <= cap:
        return call(units)
    half = cap // 2
    return scoring_rate(call(half), call(cap), half, cap, units)


def _how(units: int, cap: int, what: str) -> str:
    return (f"timed at {units} {what}" if units <= cap
            else f"timed at {cap // 2} and {cap} {what}, extrapolated to {units}")


def _synthetic(n_defender: int, n_reserved: int, n_classes: int, rng: np.random.Generator,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, probabilities (the true class favoured, more so on Defender rows) and the membership truth."""
    n = n_defender + n_reserved
    y = rng.integers(0, n_classes, n)
    is_defender = np.zeros(n, bool)
    is_defender[:n_defender] = True
    logits = rng.normal(0.0, 1.0, (n, n_classes))
    logits[np.arange(n), y] += 2.0 + 0.5 * is_defender
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    return y, proba / proba.sum(axis=1, keepdims=True), is_defender


def _reference_confidences(n: int, count: int, fraction: float, rows: np.ndarray, rng: np.random.Generator,
                           ) -> tuple[np.ndarray, np.ndarray]:
    """(n, count) confidences and the (n, count) in-training mask of reference models trained on ``rows``."""
    inside = np.zeros((n, count), bool)
    inside[rows] = rng.random((len(rows), count)) < fraction
    conf = 1.0 / (1.0 + np.exp(-(rng.normal(1.5, 1.0, (n, 1)) + 0.4 * inside + rng.normal(0.0, 0.5, (n, count)))))
    return conf, inside


def time_ltu_scoring(spec: "DefenderSpecBase", *, n_defender: int, n_reserved: int, n_classes: int, rounds: int,
                     attackers: list[str], options: "AttackerOptions", risk: "RiskOptions | None",
                     seed: int = 0) -> ScoringTime:
    """One defender's LTU work besides fits at these sizes, measured on this machine (module docstring).

    ``spec`` is the defender's (the attackers check that one exists; nothing is trained: the reference models'
    confidences are synthetic and already in the evaluator's cache). ``seed`` seeds the synthetic data only.
    """
    from privaudit.attacks.ltu import LtuData
    from privaudit.attacks.ltu_evaluation import evaluate_defender
    from privaudit.attacks.sample_risk import risk_from_confidences

    if min(n_defender, n_reserved) < 2 or n_classes < 2 or rounds < 1:
        raise ValueError(f"time_ltu_scoring needs >= 2 rows per side, >= 2 classes and >= 1 round, got "
                         f"{n_defender}, {n_reserved}, {n_classes}, {rounds}")
    rng = np.random.default_rng(seed)
    y, proba, is_defender = _synthetic(n_defender, n_reserved, n_classes, rng)
    n = len(y)
    played = [a for a in attackers if a not in NOT_TIMED]
    notes = []
    seconds = 0.0
    if played:
        conf, inside = _reference_confidences(n, options.reference_models, options.reference_fraction,
                                              np.flatnonzero(~is_defender), rng)
        key = ("reserved_reference", int(options.reference_models), float(options.reference_fraction))

        def attack(r: int) -> float:
            data = LtuData(X=np.zeros((n, 1), np.float32), y=y, proba=proba, is_defender=is_defender,
                           ids=np.arange(n).astype(str), train_rows=np.flatnonzero(is_defender),
                           n_classes=n_classes, spec=spec, reference_cache={key: (conf, inside)})
            start = time.perf_counter()
            evaluate_defender(data, r, played, np.random.default_rng(seed), options, None)
            return time.perf_counter() - start

        attack(min(5, rounds))  # warm-up: first calls' imports and caches
        seconds += _measured(attack, rounds, MAX_PROBE_ROUNDS)
        notes.append(f"attackers {', '.join(played)} {_how(rounds, MAX_PROBE_ROUNDS, 'rounds')}")
    if risk is not None and risk.reference_models > 0:
        conf_r, inside_r = _reference_confidences(n, risk.reference_models, 0.5, np.arange(n), rng)
        conf_t = proba[np.arange(n), y]

        def risk_call(bootstrap: int) -> float:
            start = time.perf_counter()
            risk_from_confidences(conf_t, conf_r, inside_r, is_defender, replace(risk, bootstrap=bootstrap),
                                  np.random.default_rng(seed))
            return time.perf_counter() - start

        seconds += _measured(risk_call, risk.bootstrap, MAX_PROBE_BOOTSTRAP)
        notes.append(f"per-sample risk {_how(risk.bootstrap, MAX_PROBE_BOOTSTRAP, 'bootstrap resamples')}")
    left = sorted(set(attackers) & NOT_TIMED)
    if left:
        notes.append(f"not timed: {', '.join(left)}")
    return ScoringTime(round(seconds, 9), f"synthetic {n_defender} + {n_reserved} rows x {n_classes} classes; "
                       + "; ".join(notes))


def time_gradient_pass(spec: "DefenderSpecBase", *, n_rows: int, d: int, n_classes: int, seed: int = 0) -> float:
    """Seconds of the white-box ``gradient`` attacker's per-sample gradient pass over an LTU table of ``n_rows``
    rows of ``d`` features for this defender: the attacker's own :func:`privaudit.attacks.ltu_gradient.gradient_norms`
    on random rows and, for a torch head, random weights of its architecture; on one torch thread, as the LTU stage
    runs it. 0.0 for a defender the attacker does not apply to. Beyond :data:`MAX_GRADIENT_ROWS` rows extrapolated
    from half and all of them."""
    from types import SimpleNamespace

    import torch

    from privaudit.attacks.ltu import AttackTable
    from privaudit.attacks.ltu_gradient import NotApplicable, gradient_norms
    from privaudit.defenders.torch_head import build_mlp
    from privaudit.repro.threads import one_thread

    if min(n_rows, d) < 1 or n_classes < 2:
        raise ValueError(f"time_gradient_pass needs >= 1 row and feature and >= 2 classes, got {n_rows}, {d}, "
                         f"{n_classes}")
    rng = np.random.default_rng(seed)
    model = None
    if spec.kind == "torch_mlp":
        net = build_mlp(d, list(getattr(spec, "hidden", [])), n_classes, generator=torch.Generator().manual_seed(seed))
        model = SimpleNamespace(net=net.eval())

    def call(rows: int) -> float:
        X = rng.normal(size=(rows, d)).astype(np.float32)
        y = rng.integers(0, n_classes, rows)
        proba = np.full((rows, n_classes), 1.0 / n_classes)
        table = AttackTable(X=X, y=y, proba=proba, loss=np.full(rows, np.log(n_classes)), n_classes=n_classes,
                            spec=spec, model=model, rng=rng)  # type: ignore[arg-type]
        with one_thread():
            start = time.perf_counter()
            gradient_norms(table)
            return time.perf_counter() - start

    try:
        call(min(n_rows, 64))  # warm-up: torch.func's first call
    except NotApplicable:
        return 0.0
    return _measured(call, n_rows, MAX_GRADIENT_ROWS)
