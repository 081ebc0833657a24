"""Benchmark: the white-box audit's runs on one GPU, one after the other or in forked workers at once (issue 43).

The question it answers: may a trainer audit's independent runs (the white-box audit's ``whitebox.runs``, each one
watched opacus run of the ``dpsgd_eps1`` defender) share one GPU from several processes? Today
``audits.protocol.trainer_audit_workers`` keeps them in the stage's process on CUDA ("runs sharing one GPU were
never measured"), so at 50 000 × 512 the stage took 55 s for two runs of 7 820 steps, each bound by the host
(opacus's Python and kernel launches, ~3.8 ms a watched step on an H200) rather than by the GPU.

Each row is one :func:`privaudit.audits.whitebox.whitebox_audit` call — ``runs`` watched fits of the default
``dpsgd_eps1`` recipe (linear head, batch 64, lr 0.5, C 1, ε 1, δ 1e-5, PRV) on an n × 512 × 10 synthetic table,
``--epochs`` epochs — with ``workers`` 1 (in this process) or ``runs`` (forked workers; this process never touches
CUDA, so a fork is allowed and each worker opens its own CUDA context), on ``--device``. It reports the wall,
the wall per run and the speed-up over one worker, and checks that the estimate is the same whatever the workers
(it must be: each run's seeds are its own).

Run:  python benchmarks/bench_whitebox_runs_device.py [--device cuda] [--n 25000] [--epochs 2] [--runs 2,4]
      python benchmarks/bench_whitebox_runs_device.py --dry-run          (the CPU, shrunk: checks the script)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
import warnings
from pathlib import Path

import numpy as np


def _table(n: int, d: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(0)
    centers = g.normal(size=(classes, d))
    y = g.integers(0, classes, n)
    return (centers[y] * 0.3 + g.normal(size=(n, d))).astype(np.float32), y.astype(np.int64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="shrunk, on the CPU: checks the script")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--n", type=int, default=25_000, help="training rows (the Defender half of 50 000)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (the default recipe has 20)")
    ap.add_argument("--runs", default="2,4", help="comma-separated run counts")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = "cpu" if args.dry_run else args.device
    n = 600 if args.dry_run else args.n
    runs_list = [2] if args.dry_run else [int(r) for r in args.runs.split(",")]
    warnings.filterwarnings("ignore")

    from privaudit.audits.whitebox import defender_trainer, whitebox_audit
    from privaudit.defenders.registry import make_defender, validate_defender_spec

    X, y = _table(n, 512, 10)
    spec = validate_defender_spec({"name": "dpsgd_eps1", "kind": "dp_sgd", "epsilon": 1.0, "delta": 1e-5,
                                   "epochs": args.epochs, "batch_size": 64, "lr": 0.5, "max_grad_norm": 1.0},
                                  where="defenders[2]")
    fit = defender_trainer(lambda: make_defender(spec, 10, device=device))
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"device={device} cores={os.cpu_count()} load={os.getloadavg()[0]:.2f}; dpsgd_eps1 recipe, {args.epochs} "
        f"epochs on {n} x 512 x 10 ({args.epochs * round(n / 64)} steps a run); one whitebox_audit call per row")
    def audit(runs: int, workers: int, trainer=fit) -> tuple[float, float]:  # noqa: ANN001
        t = time.perf_counter()
        res = whitebox_audit(trainer, X, y, runs=runs, delta=1e-5, level=0.05, accountant="prv", seed=3,
                             workers=workers)
        return time.perf_counter() - t, res.epsilon

    # warm-up on the CPU (σ from the accountant, imports) so that no row pays it; this process never touches CUDA:
    # the one-worker rows run in a forked child of their own, which opens its CUDA context as the stage would
    audit(1, 1, defender_trainer(lambda: make_defender(spec, 10, device="cpu")))
    fork = multiprocessing.get_context("fork")
    for runs in runs_list:
        walls, eps = {}, {}
        recv, send = fork.Pipe(duplex=False)
        child = fork.Process(target=lambda r=runs: send.send(audit(r, 1)))  # forked: the closure is not pickled
        child.start()
        walls[1], eps[1] = recv.recv()
        child.join()
        walls[runs], eps[runs] = audit(runs, runs)
        same = eps[1] == eps[runs]
        say(f"runs={runs}: workers 1 {walls[1]:7.2f} s ({walls[1] / runs:6.2f} s a run)   workers {runs} "
            f"{walls[runs]:7.2f} s ({walls[runs] / runs:6.2f} s a run)   speed-up x{walls[1] / walls[runs]:.2f}   "
            f"same estimate: {same} (eps_hat {eps[1]:.4g})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
