"""Benchmark: tightness of the many-run black-box audit on the default DP-SGD linear head (issue 26).

The recipe of ``params.yaml`` defender ``dpsgd_eps1`` (linear head, 20 epochs, batch 64, lr 0.5,
C = 1, δ = 1e-5, opacus accountant) at claims ε ∈ {1, 2, 4, 8}, trained on a digits Defender half
(standardized pixels, stratified 50 % split drawn from ``np.random.default_rng(2026)``: 898 rows)
by the batched trainer. Per claim: the last-iterate heuristic ceiling (Steinke et al. 2024), the
audit's μ point estimate, μ_L, ε̂ (GDP view) and the assumption-free ε̂, runs per side, wall time.

Run:  nice python benchmarks/bench_blackbox_tightness.py --runs 2000 --eps 1 2 4 8 --seeds 0 \
          --out benchmarks/results/blackbox_tightness_default.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

from privaudit.testing.blackbox_runs import BlackboxAuditConfig, audit_batched_recipe
from privaudit.data.split import stratified_split
from privaudit.defenders.specs import validate_defender_spec
from privaudit.features.identity import standardize
from privaudit.defenders.recipes import recipe_from_spec


def digits_defender(seed: int = 2026) -> tuple[np.ndarray, np.ndarray]:
    """Standardized digits pixels of a stratified 50 % Defender split (898 rows, 64 features)."""
    X, y = load_digits(return_X_y=True)
    X = standardize(X)
    split = stratified_split(np.arange(len(y)), y, 0.5, np.random.default_rng(seed))
    keep = (split["role"] == "defender").to_numpy()
    return X[keep].astype(np.float32), y[keep].astype(np.int64)


def default_spec(eps: float) -> dict:
    return {"name": "dpsgd", "kind": "dp_sgd", "epsilon": eps, "delta": 1e-5, "epochs": 20, "batch_size": 64,
            "lr": 0.5, "max_grad_norm": 1.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    ap.add_argument("--runs", type=int, default=2000, help="runs per side (with / without the canary)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--level", type=float, default=0.05)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, y = digits_defender()
    head = ("eps_claim | sigma | ceiling mu / eps_gdp / eps_exact | mu_point | mu_L | eps_hat (GDP) | eps_hat/eps | "
            "eps_hat_rate (no assumption) | runs/side | tuning/side | wall s | cpu s | seed")
    lines = [f"# many-run black-box audit, default digits DP-SGD linear head ({len(y)} rows); level {args.level}, "
             f"delta 1e-5, add/remove; machine: {platform.machine()}, {os.cpu_count()} cores shared with other "
             f"jobs (load avg at start {os.getloadavg()[0]:.1f}), torch threads {args.threads}, CPU only", head]
    print("\n".join(lines), flush=True)
    for eps in args.eps:
        rec = recipe_from_spec(validate_defender_spec(default_spec(eps)), len(y))
        for seed in args.seeds:
            t, c0 = time.perf_counter(), time.process_time()
            r = audit_batched_recipe(X, y, 10, rec, BlackboxAuditConfig(runs_in=args.runs, runs_out=args.runs,
                                                                         seed=seed, level=args.level))
            c = r.ceiling
            row = (f"{eps:g} | {rec.dp.noise_multiplier:.3f} | {c.mu:.3f} / {c.eps_gdp:.2f} / {c.eps_exact:.2f} | "
                   f"{r.mu_point:.3f} | {r.mu_lower_bound:.3f} | {r.eps_lower_bound:.2f} | "
                   f"{r.eps_lower_bound / eps:.2f} | {r.eps_lower_bound_rate:.2f} | {args.runs} | {r.tuning_in} | "
                   f"{time.perf_counter() - t:.0f} | {time.process_time() - c0:.0f} | {seed}")
            print(row, flush=True)
            lines.append(row)
    lines.append(f"# canary: {r.canary}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
