"""Benchmark: how the plan's truncated-call probe of a batched trainer spreads with its second small call's length.

The plan prices a long batched recipe from three truncated calls
(:func:`privaudit.planning.fit_probe.rate_from_truncated`): (2 models, k), (large, k) and (2 models, K). The per-step
cost is their difference over K - k, multiplied by the full length, so timing noise in it is multiplied too. This
times, alternating on one torch thread, the default ``mlp`` defender's truncated calls — (2, 1), (64, 1), (2, 2),
(2, 4) epochs — ``--rounds`` times, and its whole 30-epoch calls of 2 and 64 models (the plain way: what the calls
really cost) ``--whole`` times. Then it draws, many times, a median of three of each truncated call (what one probe
sees) and plans a whole call of 2 and of 64 models from K = 2k (before) and K = 4k (now, ``LONG_FACTOR``): the
5/50/95 % of the planned over the median measured whole call, and each probe's cost.

Run:  PYTHONPATH=src:. python benchmarks/bench_probe_lengths.py [--n 5000] [--d 128] [--rounds 15] [--whole 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.pairs import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000, help="Defender rows (the 10k benchmark's Defender set: 5000)")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--whole", type=int, default=3)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from privaudit.defenders.recipes import recipe_from_spec
    from privaudit.defenders.registry import validate_defender_spec
    from privaudit.planning.fit_probe import LONG_FACTOR, SMALL, rate_from_truncated
    from privaudit.train import TrainData, train_heads

    torch.set_num_threads(1)
    g = np.random.default_rng(0)
    y = g.integers(0, 10, args.n)
    X = (g.normal(size=(10, args.d))[y] * 0.3 + g.normal(size=(args.n, args.d))).astype(np.float32)
    spec = validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [64], "epochs": 30, "batch_size": 64,
                                   "lr": 0.05, "randomness": "unseeded"}, where="defenders[1]")
    recipe = recipe_from_spec(spec, args.n, 10)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    large, full, k = 64, recipe.epochs, 1

    def timed(models: int, epochs: int) -> float:
        r = replace(recipe, epochs=epochs)
        t = time.perf_counter()
        train_heads(r, TrainData(Xt, yt, n_models=models), 10, torch.Generator().manual_seed(models))
        return time.perf_counter() - t

    timed(SMALL, 1)  # warm-up
    probes = [(SMALL, k), (large, k), (SMALL, 2 * k), (SMALL, LONG_FACTOR * k)]
    times: dict[tuple[int, int], list[float]] = {p: [] for p in [*probes, (SMALL, full), (large, full)]}
    whole_every = max(1, args.rounds // max(1, args.whole))
    for r in range(args.rounds):
        for p in probes:
            times[p].append(timed(*p))
        if r % whole_every == 0 and len(times[(large, full)]) < args.whole:
            for p in ((SMALL, full), (large, full)):
                times[p].append(timed(*p))
    truth = {m: statistics.median(times[(m, full)]) for m in (SMALL, large)}
    rng = np.random.default_rng(1)
    lines = [f"truncated-call probe of the default mlp (hidden 64, 30 epochs, batch 64), {args.n} x {args.d} x 10, one "
             f"torch thread, load {os.getloadavg()[0]:.2f}; {args.rounds} rounds of the truncated calls, {args.whole} "
             f"whole calls of each size (alternating); {args.draws} probes drawn (median of 3 of each call)",
             "measured whole calls (median): " + ", ".join(f"{m} models {truth[m]:.3f} s" for m in (SMALL, large)),
             "truncated calls (median): " + ", ".join(f"({m}, {e}) {statistics.median(times[(m, e)]):.3f} s"
                                                      for m, e in probes)]
    for long in (2 * k, LONG_FACTOR * k):
        ratios: dict[int, list[float]] = {SMALL: [], large: []}
        for _ in range(args.draws):
            med = {p: float(np.median(rng.choice(times[p], 3, replace=False))) for p in probes}
            call, model = rate_from_truncated(med[(SMALL, k)], med[(large, k)], med[(SMALL, long)], k, full,
                                              n_large=large, k_long=long)
            for m in ratios:
                ratios[m].append((call + m * model) / truth[m])
        cost = 3 * sum(statistics.median(times[p]) for p in ((SMALL, k), (large, k), (SMALL, long)))
        label = "before" if long == 2 * k else "now"
        lines.append(f"K = {long} epochs ({label}; probe ~{cost:.2f} s): planned / measured whole call, 5/50/95 %: "
                     + "; ".join(f"{m} models " + "/".join(f"{q:.2f}" for q in np.percentile(ratios[m], [5, 50, 95]))
                                 for m in ratios))
    report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
