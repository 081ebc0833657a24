"""Benchmark: what the black-box one-run audit sees of the planted-bug catalogue as plain user trainers.

The seven DP-SGD bugs of issue 14 ((a) σ/4, (b) σ for a 10× larger data set, (c) no clipping,
(d) no noise, (e) noise once per epoch, (f) one noise draw reused, (g) shuffled fixed-size
batches) as plain numpy trainers (``src/privaudit/testing/planted/blackbox_trainers.py``, no opacus, no hook),
claiming ε = 1 (δ = 1e-5) on the digits Defender half; one-run audit with the default design
(160 canary rows, one training run, level 0.05) over several seeds. The white-box audit catches
all seven when the trainer is an opacus loop that calls ``privaudit.hooks.watch``
(``benchmarks/bench_whitebox.py``); this table shows what remains visible from the final model.

Run:  nice python benchmarks/bench_catalogue_blackbox.py [--seeds 5] [--out benchmarks/results/catalogue_blackbox_digits.txt]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits


from privaudit.audits.one_run import one_run_audit  # noqa: E402
from privaudit.testing.planted.blackbox_trainers import BUGS, train_dp_sgd  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    X = ((X - X.mean(0)) / np.maximum(X.std(0), 1e-12)).astype(np.float32)[::2]
    y = y[::2].astype(np.int64)
    lines = [f"# one-run black-box audit of plain DP-SGD trainers claiming eps = 1 (delta 1e-5) on digits "
             f"({len(y)} rows); {args.seeds} seeds; machine: {platform.machine()}, {os.cpu_count()} cores, CPU only",
             "recipe | eps_hat median [min, max] | flagged (eps_hat > 1) | seconds"]
    print(lines[-1])
    for bug in BUGS:
        t = time.perf_counter()
        eps = [one_run_audit(lambda Xc, yc, s, bug=bug: train_dp_sgd(Xc, yc, 10, s, bug=bug), X, y, 10,
                             level=0.05, delta=1e-5, seed=seed).eps_lower_bound for seed in range(args.seeds)]
        row = (f"{bug or 'correct'} | {np.median(eps):.2f} [{min(eps):.2f}, {max(eps):.2f}] | "
               f"{sum(e > 1.0 for e in eps)}/{args.seeds} | {time.perf_counter() - t:.0f}")
        print(row, flush=True)
        lines.append(row)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
