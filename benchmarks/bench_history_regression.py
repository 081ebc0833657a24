"""How often the history's regression rule flags an honest rerun, and how often it flags halved noise.

The rule (:mod:`privaudit.history.regression`): flag ε̂ > m + max(3s, REL·m, ABS) with m, s the median and
1.4826·MAD of the earlier runs of that defender and bound. Its floors REL and ABS decide what happens
while a history is short. This script measures both error rates on the one-run audit's own estimator
(Steinke, Nasr & Jagielski 2023, :func:`privaudit.stats.one_run.one_run_epsilon_lower_bound`, level 0.01,
δ = 1e-5): ``--canaries`` canaries, each included with probability 1/2, a score ``included + N(0, σ²)``
(a Gaussian mechanism of noise multiplier σ per canary), the ``--guesses`` highest scores guessed in and
the as many lowest guessed out. For each σ it draws ``--pool`` independent audits at σ (honest reruns:
another seed) and at σ/2 (a trainer edit that halves the noise), then, for histories of n earlier honest
runs drawn from the pool, counts

* false alarms: the next run is another honest one and is flagged;
* detections: the next run has the halved noise and is flagged,

for a grid of (REL, ABS). Randomness: ``numpy.random.default_rng(--seed)``; the same arguments give the
same table. Usage::

    python benchmarks/bench_history_regression.py [--pool 120] [--histories 2000] \
        [--out benchmarks/results/history_regression.txt]
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np

from privaudit.history.regression import threshold
from privaudit.stats.one_run import one_run_counts, one_run_epsilon_lower_bound


def one_run_audit(sigma: float, rng: np.random.Generator, canaries: int, guesses: int) -> float:
    """ε̂ of one simulated one-run audit of a Gaussian mechanism with noise multiplier ``sigma``."""
    included = rng.integers(0, 2, canaries)
    score = included + rng.normal(0.0, sigma, canaries)
    order = np.argsort(score)
    guess = np.zeros(canaries, dtype=int)
    guess[order[-guesses:]], guess[order[:guesses]] = 1, -1
    v, r, m = one_run_counts(included, guess)
    return one_run_epsilon_lower_bound(v, r, m, 1e-5, level=0.01)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sigmas", type=float, nargs="+", default=[2.0, 1.0, 0.8])
    p.add_argument("--canaries", type=int, default=1000)
    p.add_argument("--guesses", type=int, default=100)
    p.add_argument("--pool", type=int, default=120)
    p.add_argument("--histories", type=int, default=2000)
    p.add_argument("--earlier", type=int, nargs="+", default=[1, 3, 8])
    p.add_argument("--rel", type=float, nargs="+", default=[0.5, 0.75, 1.0])
    p.add_argument("--abs", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    lines = [f"# {__doc__.splitlines()[0]}",
             f"# machine: {platform.machine()}, {os.cpu_count()} cores; load before {os.getloadavg()[0]:.2f}",
             f"# one-run audit: {args.canaries} canaries, {args.guesses}+{args.guesses} guesses, level 0.01, "
             f"delta 1e-5; pool {args.pool} audits per sigma; {args.histories} histories per cell; seed {args.seed}"]
    for sigma in args.sigmas:
        honest = np.array([one_run_audit(sigma, rng, args.canaries, args.guesses) for _ in range(args.pool)])
        halved = np.array([one_run_audit(sigma / 2, rng, args.canaries, args.guesses) for _ in range(args.pool)])
        lines.append(f"sigma {sigma:g}: honest eps-hat median {np.median(honest):.3f} (5-95 %: "
                     f"{np.quantile(honest, 0.05):.3f}-{np.quantile(honest, 0.95):.3f}); sigma/2: median "
                     f"{np.median(halved):.3f} ({np.quantile(halved, 0.05):.3f}-{np.quantile(halved, 0.95):.3f})")
        for n in args.earlier:
            for rel in args.rel:
                for abs_ in args.abs:
                    false_alarms = detections = 0
                    for _ in range(args.histories):
                        earlier = rng.choice(honest, n)
                        fence = threshold(list(earlier), rel, abs_)[2]
                        false_alarms += rng.choice(honest) > fence
                        detections += rng.choice(halved) > fence
                    lines.append(f"  n_earlier {n}  REL {rel:<4g} ABS {abs_:<4g}  false alarms "
                                 f"{false_alarms / args.histories:6.1%}  detections {detections / args.histories:6.1%}")
    lines.append(f"# load after {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
