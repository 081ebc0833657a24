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
(in-process unless worker processes would save more than their start-up). :func:`train_subset_confidences`
is the shared trainer for any row subsets: the per-sample risk
(:mod:`privaudit.attacks.sample_risk`) trains its population reference models with it. The
evaluator keeps one defender's Reserved-side models for all its attackers
(:meth:`privaudit.attacks.ltu.RoundBatch.reference_pool`), so ``lira`` and ``rmia`` share them.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from joblib import cpu_count

from privaudit.attacks.batched_mocks import MAX_MODELS, batched_recipe, reference_confidences
from privaudit.defenders.fit_workers import workers_pay
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.seeding import draw_seeds
from privaudit.repro.worker_pool import map_in_processes, pool_startup_seconds

#: in-process fits expected to take less than this (seconds, all together) show no progress line
QUIET_S = 5.0
#: in a log (no terminal), a pass of reference fits prints one progress line when it ends, and one every this many
#: seconds while it runs (with rate and ETA); a terminal shows a bar that advances on every fit
LOG_EVERY_S = 30.0


def joblib_jobs(n_jobs: int | Literal["auto"]) -> int:
    """``n_jobs`` for joblib: ``auto`` is joblib's -1 (every core this process may use: ``joblib.cpu_count``
    honours the CPU affinity and the container's CPU quota); an int as given (>= 1, or -1)."""
    if n_jobs == "auto":
        return -1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs (ltu.n_jobs) must be >= 1, -1 or 'auto', got {n_jobs!r}")
    return n_jobs


def _fit_conf(spec: DefenderSpecBase, n_classes: int, X: np.ndarray, y: np.ndarray,
              rows: np.ndarray, seed: int) -> np.ndarray:
    from privaudit.defenders.registry import make_defender
    from privaudit.repro.threads import one_thread

    with one_thread():
        m = make_defender(spec, n_classes=n_classes, device="cpu").fit(X[rows], y[rows], seed=seed)
        p = m.predict_proba(X)
    return p[np.arange(len(y)), y]


def train_subset_confidences(spec: DefenderSpecBase, n_classes: int, X: np.ndarray, y: np.ndarray,
                             subsets: list[np.ndarray], seeds: np.ndarray, n_jobs: int | Literal["auto"] = 1, *,
                             batched: bool = True, max_models: int = MAX_MODELS,
                             device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Train one model of T_D per row subset and return every row's label confidence under each.

    The shared trainer of the reference models: offline LiRA / RMIA (Reserved-side subsets,
    :func:`train_reference_confidences`) and the per-sample risk of
    :mod:`privaudit.attacks.sample_risk` (population halves). With ``batched`` and a spec that
    has a batched recipe (``torch_mlp`` / ``dp_sgd``), up to ``max_models`` models train in one
    call of the batched trainer on ``device`` (subsets must then have one size); otherwise
    ``n_jobs`` worker processes (``auto``: every core; :mod:`privaudit.repro.worker_pool`) fit them one by one with
    ``make_defender`` (the first in-process; the rest too unless the workers would save more than their start-up,
    forked or loky's, :func:`privaudit.defenders.fit_workers.workers_pay` — same numbers either way, every fit runs
    single-threaded from its own seed).

    Args:
        subsets: K arrays of rows, each in training order. seeds: (K,) per-model seeds.

    Returns:
        (conf (n, K): p_y(x) under each model, inside (n, K) bool: row in subset k).
    """
    count, jobs = len(subsets), joblib_jobs(n_jobs)
    if count < 1 or count != len(seeds):
        raise ValueError(f"need >= 1 subsets and one seed each, got {count} subsets, {len(seeds)} seeds")
    sizes = {len(s) for s in subsets}
    recipe = batched_recipe(spec, len(subsets[0]), n_classes) if batched and len(sizes) == 1 else None
    if recipe is not None:
        conf = reference_confidences(recipe, n_classes, X, y, subsets, seeds, max_models=max_models, device=device)
    else:
        # the first model in-process: when fits are quick (a logistic regression on digits: 0.05 s) starting
        # workers costs more than the rest of the fits (privaudit.repro.worker_pool.pool_startup_seconds)
        start = time.perf_counter()
        cols = [_fit_conf(spec, n_classes, X, y, subsets[0], int(seeds[0]))]
        rest = list(zip(subsets[1:], seeds[1:]))
        first = time.perf_counter() - start
        parallel = workers_pay(first, len(rest), cpu_count() if jobs == -1 else jobs, pool_startup_seconds())
        if not parallel and first * len(rest) < QUIET_S:
            cols += [_fit_conf(spec, n_classes, X, y, s, int(sd)) for s, sd in rest]
        else:  # slow fits: a progress bar (terminal) or a line per fit, with rate and ETA
            from privaudit.progress import FitProgress, terminal

            # in a log: one line per pass, plus one every LOG_EVERY_S on a slow pass (a bar shows every fit)
            on_terminal, pending, last = terminal(), 1, time.monotonic()
            with FitProgress(f"{spec.name}: reference models", count, "fit", bar=on_terminal) as bar:
                fits = ((_fit_conf(spec, n_classes, X, y, s, int(sd)) for s, sd in rest) if not parallel else
                        map_in_processes(_fit_conf, [(s, int(sd)) for s, sd in rest], jobs,
                                         shared=(spec, n_classes, X, y)))
                for k, col in enumerate(fits, start=2):
                    cols.append(col)
                    pending += 1
                    if on_terminal or k == count or time.monotonic() - last >= LOG_EVERY_S:
                        bar.advance(pending, f"model {k}")
                        pending, last = 0, time.monotonic()
        conf = np.column_stack(cols)
    inside = np.zeros((len(y), count), bool)
    for k, s in enumerate(subsets):
        inside[s, k] = True
    return conf, inside


def train_reference_confidences(spec: DefenderSpecBase, n_classes: int, X: np.ndarray, y: np.ndarray,
                                reserved_rows: np.ndarray, count: int, fraction: float,
                                rng: np.random.Generator, n_jobs: int | Literal["auto"] = 1, *, batched: bool = True,
                                max_models: int = MAX_MODELS, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Train ``count`` reference models on random ``fraction`` subsets of ``reserved_rows``.

    LiRA offline (Carlini et al. 2022) / RMIA reference models. With ``batched`` and a spec that
    has a batched recipe, up to ``max_models`` models train in one batched call on ``device``;
    otherwise ``n_jobs`` worker processes fit them one by one. Subsets and seeds are drawn from
    ``rng`` identically on both paths.

    Returns:
        (conf (n, K): p_y(x) under each reference model, inside (n, K) bool: row in subset k).
    """
    if count < 1:
        raise ValueError(f"ltu.reference_models must be >= 1, got {count}")
    size = max(2, int(round(fraction * len(reserved_rows))))
    subsets = [np.sort(rng.choice(reserved_rows, size=size, replace=False)) for _ in range(count)]
    seeds = draw_seeds(rng, count)
    return train_subset_confidences(spec, n_classes, X, y, subsets, seeds, n_jobs, batched=batched,
                                    max_models=max_models, device=device)


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
        conf, ok = self.conf_round_parts(k, rows)
        return np.where(ok, conf, np.nan)

    def conf_round_parts(self, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`conf_round` as (confidences (m, K), usable (m, K) bool: the model is usable in round k and was
        not trained on the row)."""
        return self.__conf[rows], self.usable[k][None, :] & ~self.__inside[rows]

    def out_for_rounds(self, rows: np.ndarray) -> np.ndarray:
        """(N, m, K) bool: model k usable in round k and not trained on the row."""
        rows = np.broadcast_to(rows, (len(self.usable),) + np.shape(rows)[-1:]) if np.ndim(rows) == 1 else rows
        return self.usable[:, None, :] & ~self.__inside[rows]


