"""Speed of the ``retrain`` LTU attacker: 100 rounds on a linear defender over 1600 + 1600 samples.

Ours: mock trainings in parallel (joblib, ``--n-jobs`` workers, one BLAS thread each, rounds in
chunks). Naive: the plain sequential loop (for each round, train both mocks with default BLAS
threading, predict, compare), timed on ``--naive-rounds`` rounds and scaled to the same count.

    python benchmarks/bench_ltu_retrain.py [--rounds 100] [--n-jobs 2] [--naive-rounds 10]

Prints both times and the ratio naive / ours; the target is ours < 60 s on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from privaudit.attacks.ltu import LtuData, draw_rounds
from privaudit.attacks.ltu_retrain import RetrainAttacker
from privaudit.defenders.registry import make_defender


def synthetic(n_side: int = 1600, d: int = 64, classes: int = 10, seed: int = 0) -> LtuData:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, 2 * n_side)
    centers = rng.normal(size=(classes, d))
    X = (centers[y] + 2.0 * rng.normal(size=(2 * n_side, d))).astype(np.float32)
    is_def = np.arange(2 * n_side) < n_side
    spec = {"name": "linear", "kind": "logistic_regression", "randomness": "fixed"}
    model = make_defender(spec, n_classes=classes).fit(X[is_def], y[is_def], seed=1)
    return LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=np.arange(2 * n_side).astype(str),
                   train_rows=np.flatnonzero(is_def), n_classes=classes, spec=spec, model=model)


def naive(data: LtuData, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """The plain loop: per round, two fits and two predictions, one after the other."""
    batch, _ = draw_rounds(data, rounds, rng)
    t, out = batch.table, []
    for k in range(rounds):
        order = batch.train_order(k)
        slot = int(np.flatnonzero(order < 0)[0])
        d = []
        for u in (batch.u1[k], batch.u2[k]):
            r = order.copy()
            r[slot] = u
            m = make_defender(t.spec, n_classes=t.n_classes).fit(t.X[r], t.y[r], seed=k)  # type: ignore[arg-type]
            d.append(np.abs(m.predict_proba(t.X) - t.proba).sum(1).mean())
        out.append(d)
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--naive-rounds", type=int, default=10)
    args = ap.parse_args()
    data = synthetic()
    t0 = time.perf_counter()
    batch, truth = draw_rounds(data, args.rounds, np.random.default_rng(0))
    p = RetrainAttacker(args.n_jobs).guess(batch)
    ours = time.perf_counter() - t0
    acc = float(((p > 0.5) == truth.d_first).mean())
    t0 = time.perf_counter()
    naive(data, args.naive_rounds, np.random.default_rng(0))
    naive_s = (time.perf_counter() - t0) * args.rounds / args.naive_rounds
    print(f"retrain, {args.rounds} rounds, logistic regression on 1600+1600 x 64, 10 classes")
    print(f"  ours  (joblib n_jobs={args.n_jobs}, 1 BLAS thread/worker): {ours:7.1f} s  (A_ltu = {acc:.2f})")
    print(f"  naive (sequential loop, default threads; {args.naive_rounds} rounds scaled): {naive_s:7.1f} s")
    print(f"  ratio naive / ours: {naive_s / ours:.1f}x   target ours < 60 s: {'OK' if ours < 60 else 'MISSED'}")


if __name__ == "__main__":
    main()
