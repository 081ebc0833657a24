"""Benchmark: the pipeline's many-run black-box audit on honest DP-SGD: false alarms and tightness (issue 26).

The default digits DP-SGD linear head (``params.yaml``'s ``dpsgd_eps1`` recipe at claims
ε ∈ {1, 2, 4, 8}; :func:`benchmarks.bench_blackbox_tightness.digits_defender`, 898 rows) with the
pipeline's canary (:func:`privaudit.canaries.crafted.craft_canary`, ``blackbox.canary_scale: auto``),
``blackbox.tune_fraction`` 0.2 and the level the default budget gives the bound (``gate.beta`` / 6 =
0.00833: six gated bounds apply to a ``dp_sgd`` defender).

Per claim, a pool of ``--pool`` models per side is trained once (batched trainer, independent heads).
Then:

* **honest false alarms**: ``--reps`` audits of ``--runs`` runs per side (the default
  ``blackbox.runs``), each a uniformly random subset of the pool drawn without replacement. Each
  audit's runs are then i.i.d. draws of the recipe (a random subset of i.i.d. draws is i.i.d.), so
  the share of audits whose ε̂ exceeds the claim estimates the false-alarm probability without bias;
  audits share runs, which widens its spread (not its mean). The claim holds (opacus's PRV ε), so
  the share must stay ≤ the level.
* **tightness at the default size**: the mean and the 10/50/90 % quantiles of ε̂ over those audits
  (a single seed's number is one draw of this distribution).
* **deep audit**: one audit on the whole pool (``blackbox.runs: <pool>``), ε̂ and ε̂/ε.

``--curve`` picks ε̂ (issue 33): ``gdp`` — the GDP view, the gated bound before issue 33; ``declared`` —
the gated bound since: the certified point against the recipe's own subsampled-Gaussian curve
(:func:`privaudit.stats.claim_runs.certify_claim_scores` with the σ, q, T of ``dp_sgd_mechanism``).

Run:  nice python -m benchmarks.bench_blackbox_honest --pool 10000 --runs 2000 --reps 500 \
          --out benchmarks/results/blackbox_honest.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.bench_blackbox_tightness import default_spec, digits_defender
from privaudit.testing.blackbox_runs import BlackboxAuditConfig, audit_batched_recipe
from privaudit.defenders.dp_sgd import accountant_epsilon
from privaudit.defenders.specs import validate_defender_spec
from privaudit.stats.claim_runs import certify_claim_scores
from privaudit.stats.gdp_runs import certify_scores
from privaudit.stats.tradeoff import SubsampledGaussianFamily
from privaudit.defenders.recipes import recipe_from_spec

LEVEL = 0.05 / 6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    ap.add_argument("--pool", type=int, default=10000, help="models per side trained once per claim")
    ap.add_argument("--runs", type=int, default=2000, help="runs per side of one default-size audit")
    ap.add_argument("--reps", type=int, default=500, help="default-size audits per claim")
    ap.add_argument("--level", type=float, default=LEVEL)
    ap.add_argument("--tune-fraction", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--curve", choices=("gdp", "declared"), default="gdp",
                    help="eps-hat: the GDP view (gated before issue 33) or the recipe's own subsampled-Gaussian curve")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.runs > args.pool:
        raise SystemExit(f"--runs {args.runs} must be <= --pool {args.pool}")
    torch.set_num_threads(args.threads)
    X, y = digits_defender()
    lines = [f"# many-run black-box audit (pipeline settings) of honest DP-SGD, digits linear head ({len(y)} rows); "
             f"level {args.level:.5f} (gate.beta/6), delta 1e-5, tune_fraction {args.tune_fraction}; pool {args.pool} "
             f"models/side per claim, {args.reps} audits of {args.runs}/side drawn from it without replacement; "
             f"machine: {platform.machine()}, {os.cpu_count()} cores shared (load avg at start "
             f"{os.getloadavg()[0]:.1f}), torch threads {args.threads}, CPU only; generator seed {args.seed}; "
             f"eps_hat: {args.curve}",
             "eps_claim | last-iterate ceiling eps | flagged (eps_hat > claim) / audits | eps_hat mean [q10, q50, q90] "
             "at runs/side | mean eps_hat/eps | deep audit eps_hat (pool/side) | deep eps_hat/eps | "
             "deep eps_hat_rate | train s | cpu s"]
    print("\n".join(lines), flush=True)
    rng = np.random.default_rng(args.seed)
    for eps in args.eps:
        spec = validate_defender_spec(default_spec(eps))
        rec = recipe_from_spec(spec, len(y))
        # the claim the defenders stage records: opacus's accountant at the steps taken (e.g. 0.997 at 1)
        claim = accountant_epsilon(rec.dp.noise_multiplier, rec.dp.sample_rate, rec.dp.steps, 1e-5, spec.accountant)
        t, c0 = time.perf_counter(), time.process_time()
        deep = audit_batched_recipe(X, y, 10, rec, BlackboxAuditConfig(
            runs_in=args.pool, runs_out=args.pool, seed=int(rng.integers(2**31)), level=args.level,
            tune_fraction=args.tune_fraction))
        wall, cpu = time.perf_counter() - t, time.process_time() - c0
        s_in, s_out = deep.scores_in, deep.scores_out
        family = SubsampledGaussianFamily(1.0 / rec.dp.noise_multiplier, sample_rate=rec.dp.sample_rate,
                                          steps=rec.dp.steps)

        def eps_hat(a: np.ndarray, b: np.ndarray) -> float:
            if args.curve == "gdp":
                g, _, _, _ = certify_scores(a, b, tune_fraction=args.tune_fraction, level=args.level, delta=1e-5)
                return g.eps_lower_bound_gdp
            return certify_claim_scores(a, b, family, tune_fraction=args.tune_fraction, level=args.level,
                                        delta=1e-5).eps_lower_bound

        eh = np.empty(args.reps)
        for i in range(args.reps):
            a = s_in[rng.choice(s_in.size, args.runs, replace=False)]
            b = s_out[rng.choice(s_out.size, args.runs, replace=False)]
            eh[i] = eps_hat(a, b)
        deep_eps = eps_hat(s_in, s_out)
        q10, q50, q90 = np.quantile(eh, [0.1, 0.5, 0.9])
        row = (f"{claim:.3f} | {deep.ceiling.eps_exact:.2f} | {int((eh > claim).sum())} / {args.reps} | "
               f"{eh.mean():.2f} [{q10:.2f}, {q50:.2f}, {q90:.2f}] at {args.runs} | {eh.mean() / claim:.2f} | "
               f"{deep_eps:.2f} ({args.pool}) | {deep_eps / claim:.2f} | "
               f"{deep.eps_lower_bound_rate:.2f} | {wall:.0f} | {cpu:.0f}")
        print(row, flush=True)
        lines.append(row)
    lines.append(f"# canary: {deep.canary}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
