"""Benchmark: LiDP sample complexity — ε̂ vs trials for K = 1 vs K = √n canaries (Pillutla et al. 2023,
§6, Table 1 / Fig. 5) on DP-SGD linear heads trained with privaudit's batched trainer.

For each data set (digits; Location with ``--location``) and ε ∈ {2, 8}: for every n in the grid,
n add/remove trials with K = round(√n) canaries and n trials with K = 1 (separately trained), τ tuned
on half the trials and ε̂ certified on the other half (2nd-order Wilson for K = √n, 1st-order for
K = 1, β = 0.05, δ = 1e-5), averaged over ``--reps`` independent audits. Then the trial ratio: how many trials the K = 1 audit needs to reach the
ε̂ that K = √n reaches at the largest n (log-linear interpolation over the K = 1 curve; ">" when it
never gets there), divided by that n. The paper reports 2.3× (data poisoning) to 3× (random gradients).

Random-gradient statistics subtract the mean displacement of ``lidp.gradient_reference`` canary-free
heads (``--reference 0``: the plain ⟨c, θ_T − θ_0⟩, which certifies ~nothing on a 650-parameter head).

Run:  nice python benchmarks/bench_lidp_sample_complexity.py [--trials 128 256 512 1024] [--reps 3]
          [--canary random_gradient|mislabel|clipbkd] [--location ../shared/data/location.tgz] [--epochs 10]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from privaudit.audits.lidp import lidp_audit
from privaudit.canaries.plan import CanaryPlan
from privaudit.canaries.runner import run_trials
from privaudit.config import parse_params
from privaudit.features.feature_set import FeatureSet


def digits() -> FeatureSet:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    X, y = (X[idx] / 16.0).astype(np.float32), y[idx].astype(np.int64)
    return FeatureSet(X, y, np.array([str(i) for i in idx]), np.arange(len(y)) < len(y) // 2, 10)


def location(path: Path) -> FeatureSet | None:
    if not path.is_file():
        print(f"Location skipped: {path} not found")
        return None
    from privaudit.data.sources import load_source

    src = load_source("location", path=str(path))  # type: ignore[call-arg]
    X, y = np.asarray(src.X, np.float32), np.asarray(src.y, np.int64)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return FeatureSet(X[idx], y[idx], np.array([str(i) for i in idx]), np.arange(len(y)) < len(y) // 2,
                      int(y.max()) + 1)


def eps_hat(fs: FeatureSet, eps: float, n: int, k: int, canary: str, epochs: int, seed: int,
            reference: int = 16) -> tuple[float, float]:
    """(ε̂ of the K-canary audit at its order, seconds) for n trials."""
    p = parse_params({
        "base": {"seed": seed, "device": "cpu"},
        "defenders": [{"name": "dp", "kind": "dp_sgd", "epsilon": eps, "epochs": epochs}],
        "lidp": {"trials": n, "canaries": k, "null_canaries": k, "canary_type": canary,
                 "gradient_reference": reference},
        "compute": {"block_trials": 64},
    })
    t0 = time.perf_counter()
    out = run_trials(CanaryPlan.of(p), fs, "dp", "lidp", 0, n, "cpu")
    dt = time.perf_counter() - t0
    order = 2 if k > 1 else 1
    res, _ = lidp_audit(out["loss_in"], out["loss_null"], delta=1e-5, level=0.05, order=order, method="wilson",
                        tune_fraction=0.5, n_thresholds=24, rng=np.random.default_rng(seed))
    return float(res["eps_lower_bound"]), dt


def trials_needed(target: float, ns: list[int], curve: list[float]) -> float:
    for i, v in enumerate(curve):
        if v >= target:
            if i == 0:
                return float(ns[0])
            a, b = curve[i - 1], v
            f = (target - a) / (b - a) if b > a else 1.0
            return float(2 ** (np.log2(ns[i - 1]) + f * (np.log2(ns[i]) - np.log2(ns[i - 1]))))
    return float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--baseline-extra", type=int, nargs="*", default=[2048, 4096],
                    help="larger n for the K=1 curve only (to find where it catches up)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 8.0])
    ap.add_argument("--canary", default="random_gradient", choices=["random_gradient", "mislabel", "clipbkd"])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--location", type=Path, default=None, help="Location archive (location.tgz)")
    ap.add_argument("--datasets", nargs="+", default=["digits", "location"], choices=["digits", "location"],
                    help="which data sets to run (location also needs --location)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3, help="independent audits averaged per point")
    ap.add_argument("--reference", type=int, default=16, help="lidp.gradient_reference (random_gradient only)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    sets = {"digits": digits()} if "digits" in args.datasets else {}
    if args.location is not None and "location" in args.datasets:
        loc = location(args.location)
        if loc is not None:
            sets["location"] = loc
    def avg(fs: FeatureSet, eps: float, n: int, k: int, offset: int) -> tuple[float, float]:
        runs = [eps_hat(fs, eps, n, k, args.canary, args.epochs, args.seed + 1000 * r + offset, args.reference)
                for r in range(args.reps)]
        return float(np.mean([e for e, _ in runs])), float(sum(t for _, t in runs))

    print(f"load={os.getloadavg()[0]:.2f} canary={args.canary} epochs={args.epochs} reps={args.reps} "
          f"reference={args.reference} "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '-')}")
    for name, fs in sets.items():
        for eps in args.epsilons:
            ks, k1 = [], []
            total = 0.0
            for n in args.trials:
                e, dt = avg(fs, eps, n, max(1, round(n**0.5)), 0)
                e1, dt1 = avg(fs, eps, n, 1, 1)
                ks.append(e)
                k1.append(e1)
                total += dt + dt1
                print(f"{name} eps={eps:g} n={n:5d}: K=sqrt(n)={round(n**0.5):3d} eps_hat={e:.3f} | K=1 eps_hat={e1:.3f}")
            ns1 = list(args.trials)
            for n in args.baseline_extra:
                e1, dt1 = avg(fs, eps, n, 1, 1)
                total += dt1
                ns1.append(n)
                k1.append(e1)
                print(f"{name} eps={eps:g} n={n:5d}: K=1 eps_hat={e1:.3f}")
            if ks[-1] <= 0.0:
                print(f"{name} eps={eps:g}: K=sqrt(n) certifies nothing at n={args.trials[-1]}: no trial ratio "
                      f"(use more trials/epochs or stronger canaries); training time {total:.0f} s")
                continue
            need = trials_needed(ks[-1], ns1, k1)
            ratio = need / args.trials[-1]
            txt = f"{ratio:.2f}x" if np.isfinite(ratio) else f"> {ns1[-1] / args.trials[-1]:.1f}x"
            print(f"{name} eps={eps:g}: K=1 needs {txt} the trials to match K=sqrt(n) at n={args.trials[-1]} "
                  f"(eps_hat {ks[-1]:.3f}); training time {total:.0f} s")


if __name__ == "__main__":
    main()
