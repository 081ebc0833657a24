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
(it must be: each run's seeds are its own); a forked row that fails is reported as such. A last row times one fit
unwatched and one watched (alternating, fastest of two) (inside ``privaudit.hooks.recording``): what watching a step costs on the device.

Run:  python benchmarks/bench_whitebox_runs_device.py [--device cuda] [--n 25000] [--epochs 2] [--runs 2,4]
      python benchmarks/bench_whitebox_runs_device.py --dry-run          (the CPU, shrunk: checks the script)
"""

from __future__ import annotations

import argparse
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

    # warm-up on the CPU (σ from the accountant, imports) so that no row pays it. The forked rows come first, while
    # this process has not touched CUDA (a fork after that is refused, and the runs would go one after the other)
    audit(1, 1, defender_trainer(lambda: make_defender(spec, 10, device="cpu")))
    forked: dict[int, tuple[float, float] | str] = {}
    for runs in runs_list:
        try:
            forked[runs] = audit(runs, runs)
        except Exception as exc:  # noqa: BLE001 — a finding to report (the sixth lease: CUDA refused in the workers)
            forked[runs] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    for runs in runs_list:
        wall1, eps1 = audit(runs, 1)
        row = forked[runs]
        if isinstance(row, str):
            say(f"runs={runs}: workers 1 {wall1:7.2f} s ({wall1 / runs:6.2f} s a run)   workers {runs} {row}")
            continue
        wall, eps = row
        say(f"runs={runs}: workers 1 {wall1:7.2f} s ({wall1 / runs:6.2f} s a run)   workers {runs} "
            f"{wall:7.2f} s ({wall / runs:6.2f} s a run)   speed-up x{wall1 / wall:.2f}   "
            f"same estimate: {eps1 == eps} (eps_hat {eps1:.4g})")
    # one fit unwatched and one watched, in this process (its device warm by now): what watching a step costs
    from privaudit import hooks

    plains, watcheds = [], []
    for _ in range(2):  # alternating, fastest of two
        t = time.perf_counter()
        fit(X, y, 1)
        plains.append(time.perf_counter() - t)
        t = time.perf_counter()
        with hooks.recording(seed=2) as rec:
            fit(X, y, 1)
        rec.observations()  # what a watched run reads back at its end is part of its cost
        watcheds.append(time.perf_counter() - t)
    plain, watched, steps = min(plains), min(watcheds), rec.steps
    say(f"one fit: unwatched {plain:7.2f} s ({1000 * plain / steps:.2f} ms a step)   watched {watched:7.2f} s "
        f"({1000 * watched / steps:.2f} ms a step)   watched / unwatched x{watched / plain:.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
