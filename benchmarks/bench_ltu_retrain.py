"""Speed of the ``retrain`` LTU attacker: 100 rounds on a linear defender over 1600 + 1600 samples.

``--defender sklearn`` (default, logistic regression): ours = mock trainings in parallel (joblib,
``--n-jobs`` workers, one BLAS thread each, rounds in chunks); naive = the plain sequential loop
(for each round, train both mocks with default BLAS threading, predict, compare), timed on
``--naive-rounds`` rounds and scaled to the same count. The target is ours < 60 s on 2 CPU cores.

``--defender torch`` (``torch_mlp`` linear head, ``hidden: []``, unseeded): ours = all mocks of a
chunk of rounds in one call of the batched trainer (``--max-models`` per call); sequential = the
old ``make_defender(...).fit`` loop, one mock after the other, timed on ``--naive-rounds``
rounds and scaled; both with ``--threads`` torch threads (default 1).

    python benchmarks/bench_ltu_retrain.py [--defender sklearn|torch] [--rounds 100] [--n-jobs 2]
        [--naive-rounds 10] [--max-models 256] [--epochs 10] [--threads 1]

Prints both times and the ratio naive / ours.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from privaudit.attacks.ltu import LtuData, draw_rounds
from privaudit.attacks.ltu_retrain import RetrainAttacker
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.specs import DefenderSpecBase


def torch_spec(epochs: int) -> DefenderSpecBase:
    """A ``torch_mlp`` linear head, secret seed: the mocks cannot replay M_D."""
    return validate_defender_spec({"name": "torch_linear", "kind": "torch_mlp", "hidden": [], "epochs": epochs,
                                   "batch_size": 64, "randomness": "unseeded"})


def synthetic(n_side: int = 1600, d: int = 64, classes: int = 10, seed: int = 0,
              spec: DefenderSpecBase | None = None) -> LtuData:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, 2 * n_side)
    centers = rng.normal(size=(classes, d))
    X = (centers[y] + 2.0 * rng.normal(size=(2 * n_side, d))).astype(np.float32)
    is_def = np.arange(2 * n_side) < n_side
    spec = spec or validate_defender_spec({"name": "linear", "kind": "logistic_regression", "randomness": "fixed"})
    model = make_defender(spec, n_classes=classes).fit(X[is_def], y[is_def], seed=1)
    return LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=np.arange(2 * n_side).astype(str),
                   train_rows=np.flatnonzero(is_def), n_classes=classes, spec=spec, model=model)


def naive(data: LtuData, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """The plain loop: per round, two fits and two predictions, one after the other."""
    batch, _ = draw_rounds(data, rounds, rng)
    t, out = batch.table, []
    if t.spec is None:
        raise ValueError("the naive retrain loop needs the defender spec")
    for k in range(rounds):
        order = batch.train_order(k)
        slot = int(np.flatnonzero(order < 0)[0])
        d = []
        for u in (batch.u1[k], batch.u2[k]):
            r = order.copy()
            r[slot] = u
            m = make_defender(t.spec, n_classes=t.n_classes).fit(t.X[r], t.y[r], seed=k)
            d.append(np.abs(m.predict_proba(t.X) - t.proba).sum(1).mean())
        out.append(d)
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--defender", choices=["sklearn", "torch"], default="sklearn")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--naive-rounds", type=int, default=10)
    ap.add_argument("--max-models", type=int, default=256, help="torch: mocks per batched call")
    ap.add_argument("--epochs", type=int, default=10, help="torch: training epochs of the head")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch: intra-op threads for M_D, the batched call and the sequential loop (on a loaded "
                         "machine more than 1 thread makes these tiny trainings orders of magnitude slower)")
    args = ap.parse_args()
    if args.defender == "torch":
        bench_torch(args)
        return
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


def bench_torch(args: argparse.Namespace) -> None:
    """Batched mocks (one train_heads call per chunk) vs the old sequential make_defender loop."""
    import torch

    torch.set_num_threads(args.threads)
    data = synthetic(spec=torch_spec(args.epochs))
    t0 = time.perf_counter()
    batch, truth = draw_rounds(data, args.rounds, np.random.default_rng(0))
    p = RetrainAttacker(args.n_jobs, max_models=args.max_models).guess(batch)
    ours = time.perf_counter() - t0
    acc = float(((p > 0.5) == truth.d_first).mean())
    t0 = time.perf_counter()
    naive(data, args.naive_rounds, np.random.default_rng(0))
    naive_s = (time.perf_counter() - t0) * args.rounds / args.naive_rounds
    print(f"retrain, {args.rounds} rounds, torch_mlp linear head (unseeded, {args.epochs} epochs, batch 64) "
          f"on 1600+1600 x 64, 10 classes; torch threads {torch.get_num_threads()}")
    print(f"  batched    (train_heads, <= {args.max_models} mocks per call): {ours:7.1f} s  (A_ltu = {acc:.2f})")
    print(f"  sequential (make_defender(...).fit loop; {args.naive_rounds} rounds scaled): {naive_s:7.1f} s")
    print(f"  ratio sequential / batched: {naive_s / ours:.1f}x")


if __name__ == "__main__":
    main()
