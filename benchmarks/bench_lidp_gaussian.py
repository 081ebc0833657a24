"""Benchmark: LiDP auditing of the Gaussian mechanism (Pillutla et al. 2023, §4 / App. E, Fig. 3 left).

For eps in {1, 2, 4} and n in {256, 1024, 4096} trials, prints the certified lower bound eps_hat
(mean over repetitions, level = 0.05, delta = 1e-5) for
  * K = 1 canary, 1st-order Wilson interval (the standard "DP + Wilson" baseline),
  * K = round(sqrt(n)) canaries with 2nd- and 4th-order Wilson intervals (LiDP),
  * K = round(sqrt(n)) canaries with the 2nd-order Bernstein interval (non-asymptotic),
and the trial ratio: how many trials the K = 1 baseline needs to reach the eps_hat of
K = sqrt(n) + 2nd-order Wilson, divided by n (log-linear interpolation of the baseline over
n in {256, ..., 65536}; ">" when the baseline never gets there).

Each method tunes its threshold on n separate trials (LiDP App. E) and is certified on n fresh
trials.  Run:  nice python benchmarks/bench_lidp_gaussian.py [--reps 5] [--dim 1000000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma, simulate_gaussian_scores
from privaudit.stats import certify_selected, select_threshold

DELTA = 1e-5
LEVEL = 0.05  # failure probability of each certified one-sided eps_hat (the paper's beta)
N_GRID = (256, 1024, 4096)
N_BASELINE = (256, 1024, 4096, 16384, 65536)
EPSILONS = (1.0, 2.0, 4.0)
METHODS = {  # name -> (K = 1 ?, order, interval method)
    "K=1 W1": (True, 1, "wilson"),
    "K=sqrt(n) W2": (False, 2, "wilson"),
    "K=sqrt(n) W4": (False, 4, "wilson"),
    "K=sqrt(n) B2": (False, 2, "bernstein"),
}


def _grid(null_scores: np.ndarray, n_thresholds: int = 40) -> np.ndarray:
    levels = 1.0 - np.geomspace(0.5, 1.0 / (null_scores.size + 1), n_thresholds)
    return np.unique(np.quantile(null_scores, levels))


def _audit(sigma: float, n: int, k: int, dim: int, rng: np.random.Generator, methods: list[tuple[int, str]]) -> list[float]:
    """Tune on n trials, certify on n fresh trials, for each (order, method); same data for all."""
    tx, ty = simulate_gaussian_scores(sigma, n, k, dim, rng)
    cx, cy = simulate_gaussian_scores(sigma, n, k, dim, rng)
    grid = _grid(ty)
    out = []
    for order, method in methods:
        sel = select_threshold(tx, ty, grid, DELTA, level=LEVEL, order=order, method=method)  # type: ignore[arg-type]
        out.append(certify_selected(sel, cx, cy, DELTA, level=LEVEL, order=order,
                                    method=method).epsilon_lower_bound)  # type: ignore[arg-type]
    return out


def _trials_needed(target: float, ns: tuple[int, ...], eps_hat: list[float]) -> float:
    """Smallest n (log-linear interpolation) at which the baseline mean eps_hat reaches target."""
    logs = np.log2(ns)
    for i, v in enumerate(eps_hat):
        if v >= target:
            if i == 0:
                return float(ns[0]) if v == target else float("nan")  # below the grid
            lo, hi = eps_hat[i - 1], v
            frac = (target - lo) / (hi - lo) if hi > lo else 1.0
            return float(2.0 ** (logs[i - 1] + frac * (logs[i] - logs[i - 1])))
    return math.inf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dim", type=int, default=10**6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    print(f"LiDP audit of the Gaussian mechanism: d={args.dim}, delta={DELTA}, level={LEVEL}, "
          f"{args.reps} repetitions (mean eps_hat; std in parentheses)")
    header = f"{'eps':>4} {'n':>6} {'K':>4} | " + " | ".join(f"{m:>15}" for m in METHODS) + f" | {'K=1 trials for W2 eps_hat':>26} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for eps in EPSILONS:
        sigma = gaussian_mechanism_sigma(eps, DELTA)
        baseline = {}
        for n in N_BASELINE:
            vals = [_audit(sigma, n, 1, args.dim, rng, [(1, "wilson")])[0] for _ in range(args.reps)]
            baseline[n] = (float(np.mean(vals)), float(np.std(vals)))
        base_curve = [baseline[n][0] for n in N_BASELINE]
        for n in N_GRID:
            k = round(math.sqrt(n))
            lidp = np.array([_audit(sigma, n, k, args.dim, rng, [(2, "wilson"), (4, "wilson"), (2, "bernstein")])
                             for _ in range(args.reps)])
            means = [baseline[n][0], *lidp.mean(axis=0)]
            stds = [baseline[n][1], *lidp.std(axis=0)]
            need = _trials_needed(means[1], N_BASELINE, base_curve)
            need_s = f">{N_BASELINE[-1]}" if math.isinf(need) else ("<256" if math.isnan(need) else f"{need:.0f}")
            ratio_s = f">{N_BASELINE[-1] / n:.0f}" if math.isinf(need) else ("<1" if math.isnan(need) else f"{need / n:.1f}")
            cells = " | ".join(f"{m:6.3f} ({s:5.3f})" for m, s in zip(means, stds))
            print(f"{eps:4.0f} {n:6d} {k:4d} | {cells} | {need_s:>26} | {ratio_s:>6}")
        print(f"     K=1 W1 baseline over n: " + ", ".join(f"n={n}: {baseline[n][0]:.3f}" for n in N_BASELINE))
    print(f"(total {time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
