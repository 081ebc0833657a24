"""The LTU stage's scoring at a user's scale: offline RMIA's rounds and the per-sample risk's bootstrap, the loops
as written before (:mod:`privaudit.testing.scoring_reference`) against the library's.

On synthetic data of the LTU stage's shapes (``--n`` Defender + ``--n`` Reserved rows, 10 classes; the reference
models' confidences filled in, nothing trains), the default params' sizes: RMIA over ``--rounds`` rounds with 8
Reserved-side reference models, the risk's bootstrap of 200 resamples over 32 population reference models. Arms
alternate, after one warm-up call of each; every pair must give the same bits (else the benchmark stops).

    PYTHONPATH=src:. python benchmarks/bench_ltu_scoring.py [--n 25000] [--rounds 1000] [--pairs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.pairs import pair_summary, report
from privaudit.attacks.ltu import LtuData, draw_rounds
from privaudit.attacks.mia_rmia import RmiaAttacker
from privaudit.attacks.sample_risk import P_CLIP, RiskOptions, _bootstrap, _fit
from privaudit.attacks.mia_lira import logit_conf
from privaudit.defenders.specs import validate_defender_spec
from privaudit.planning.ltu_scoring import _reference_confidences, _synthetic
from privaudit.testing.scoring_reference import risk_bootstrap_per_resample, rmia_guess_per_round


def _timed(call: Callable[[], object]) -> tuple[float, bytes]:
    start = time.perf_counter()
    out = call()
    wall = time.perf_counter() - start
    arrays = out if isinstance(out, tuple) else (out,)
    return wall, b"".join(np.asarray(a).tobytes() for a in arrays)


def _pairs(before: Callable[[], object], after: Callable[[], object], pairs: int) -> tuple[list[float], list[float]]:
    _timed(before), _timed(after)  # warm-up
    walls: tuple[list[float], list[float]] = ([], [])
    for _ in range(pairs):
        (wb, bb), (wa, ba) = _timed(before), _timed(after)
        if bb != ba:
            raise SystemExit("the two arms gave different bits")
        walls[0].append(wb)
        walls[1].append(wa)
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=25000, help="Defender rows (and as many Reserved)")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    y, proba, is_defender = _synthetic(a.n, a.n, 10, rng)
    n = len(y)
    conf, inside = _reference_confidences(n, 8, 0.5, np.flatnonzero(~is_defender), rng)
    data = LtuData(X=np.zeros((n, 1), np.float32), y=y, proba=proba, is_defender=is_defender,
                   ids=np.arange(n).astype(str), train_rows=np.flatnonzero(is_defender), n_classes=10,
                   spec=validate_defender_spec({"name": "logreg", "kind": "logistic_regression"}),
                   reference_cache={("reserved_reference", 8, 0.5): (conf, inside)})
    batch, _ = draw_rounds(data, a.rounds, np.random.default_rng(1))
    rmia = RmiaAttacker(count=8, fraction=0.5)
    rmia_walls = _pairs(lambda: rmia_guess_per_round(rmia, batch), lambda: rmia.guess(batch), a.pairs)

    conf_r, inside_r = _reference_confidences(n, 32, 0.5, np.arange(n), rng)
    phi = logit_conf(np.clip(conf_r, P_CLIP, 1 - P_CLIP))
    phi_t = logit_conf(np.clip(proba[np.arange(n), y], P_CLIP, 1 - P_CLIP))
    _, priors = _fit(phi, inside_r)
    options = RiskOptions()
    risk_walls = _pairs(lambda: risk_bootstrap_per_resample(phi_t, phi, inside_r, priors, options,
                                                            np.random.default_rng(2)),
                        lambda: _bootstrap(phi_t, phi, inside_r, priors, options, np.random.default_rng(2)), a.pairs)
    text = "\n\n".join([
        pair_summary(f"bench_ltu_scoring: offline RMIA guess, {a.n} + {a.n} rows, {a.rounds} rounds, 8 reference "
                     "models; same bits in every pair", ("per round (before)", rmia_walls[0]),
                     ("grouped (library)", rmia_walls[1]), load),
        pair_summary(f"bench_ltu_scoring: per-sample risk bootstrap, {n} samples x 32 reference models x "
                     f"{options.bootstrap} resamples (interval ends); same bits in every pair",
                     ("per resample (before)", risk_walls[0]), ("blocked (library)", risk_walls[1]), load),
    ])
    report(text, a.out)


if __name__ == "__main__":
    main()
