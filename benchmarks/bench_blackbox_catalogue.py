"""Benchmark: the planted-bug catalogue as plain trainers under the many-run black-box audit.

Plain DP-SGD trainers of a linear softmax head (``src/privaudit/testing/planted/blackbox_plain_trainers.py``: numpy or
torch loops, zero or random init, update scaled by lr/B or lr; bugs σ/4, accountant told 10× n,
no clipping, no noise, noise once per epoch) on the digits Defender half, claims ε ∈ {1, 4}
(δ = 1e-5). The variant of seed s is ``VARIANTS[s % 5]``. Each (claim, bug, seed) trains runs
sequentially, in = with the crafted canary, out = without (alternating), and audits the first N
runs per side for N on a ladder (each prefix is a valid fixed-size audit: independent runs, τ on
the prefix's first 20 %, certified on the rest at ``--level``: 0.05, or the pipeline's share gate.beta/6 =
0.00833); "caught" = ε̂ > claim, where ε̂ is, per ``--curves`` (issue 33):

* ``gdp`` — the GDP view (what the gate used before issue 33; assumes a Gaussian curve);
* ``eps_delta`` — the certified point against the bare (ε, δ) claim's polygon (the gated bound of a
  trainer that declares nothing);
* ``declared`` — against the claimed recipe's own subsampled-Gaussian curve (σ, q, T of the
  *correct* recipe at the claim: what a trainer declaring ``mechanism: subsampled_gaussian`` gets).

All curves are judged on the same runs; the ladder stops once every curve has caught the bug.
Runs stop at the first ladder N that catches the bug (so "runs/side" is the smallest such N) or
at the ladder's top. The correct recipe is audited at the top of the ladder only.

Run:  python benchmarks/bench_blackbox_catalogue.py --claims 1 --seeds 5 --out benchmarks/results/blackbox_catalogue_eps1.txt
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_blackbox_tightness import digits_defender  # noqa: E402

from privaudit.testing.blackbox_runs import certify_scores  # noqa: E402
from privaudit.stats.claim_runs import certify_claim_scores  # noqa: E402
from privaudit.claims.mechanisms import SubsampledGaussianMechanism  # noqa: E402
from privaudit.stats.tradeoff import EpsDeltaFamily  # noqa: E402
from privaudit.canaries.crafted import craft_canary, score_model  # noqa: E402
from privaudit.testing.planted.blackbox_plain_trainers import BUGS, PlainTrainer, recipe_numbers, true_epsilon  # noqa: E402

CURVES = ("gdp", "eps_delta", "declared")


def curve_epsilon(curve: str, si, so, claim: float, n: int, level: float) -> float:
    """ε̂ of one audit of the runs (si, so) under ``curve`` (see the module docstring)."""
    if curve == "gdp":
        g, _, _, _ = certify_scores(si, so, tune_fraction=0.2, level=level, delta=1e-5)
        return g.eps_lower_bound_gdp
    if curve == "eps_delta":
        fam = EpsDeltaFamily(claim, 1e-5)
    else:
        sigma, q, steps = recipe_numbers(n, claim, "correct")
        fam = SubsampledGaussianMechanism(kind="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q,
                                          steps=steps).family()
    return certify_claim_scores(si, so, fam, tune_fraction=0.2, level=level, delta=1e-5).eps_lower_bound

VARIANTS = (("numpy", "random", "lr/B"), ("torch", "zero", "lr"), ("numpy", "zero", "lr"),
            ("torch", "random", "lr/B"), ("numpy", "random", "lr"))


def run_scores(trainer: PlainTrainer, X, y, canary, n: int, seed: int, start: int = 0):
    """Scores of runs start..start+n per side (in, out alternating), seeds from SeedSequence(seed)."""
    X_in = np.vstack([X, canary.x[None]]).astype(np.float32)
    y_in = np.concatenate([y, [canary.label]]).astype(np.int64)
    ss = np.random.SeedSequence(seed).spawn(2 * (start + n))[2 * start:]
    s_in, s_out = [], []
    for i, child in enumerate(ss):
        sd = int(child.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
        if i % 2 == 0:
            s_in.append(score_model(trainer(X_in, y_in, sd), canary))
        else:
            s_out.append(score_model(trainer(X, y, sd), canary))
    return np.array(s_in), np.array(s_out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--claims", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--bugs", nargs="+", default=list(BUGS))
    ap.add_argument("--ladder", type=int, nargs="+", default=[20, 40, 80, 160])
    ap.add_argument("--correct-seeds", type=int, default=3, help="seeds for the correct recipe (top of the ladder)")
    ap.add_argument("--scale", type=float, default=None,
                    help="canary scale s (default: clip-aware, 3; the pipeline uses 30 for trainers it does not run)")
    ap.add_argument("--level", type=float, default=0.05, help="level of each audit (pipeline: gate.beta/6 = 0.00833)")
    ap.add_argument("--curves", nargs="+", choices=CURVES, default=["gdp"],
                    help="what eps-hat tests the point against (issue 33): gdp view, the (eps, delta) polygon, the "
                         "claimed recipe's declared subsampled-Gaussian curve")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    X, y = digits_defender()
    canary = craft_canary(X, y, 10, scale=args.scale)
    lines = [f"# many-run black-box audit of plain trainers (final model only) on digits ({len(y)} rows), level {args.level:.5g}, "
             f"delta 1e-5; ladder {args.ladder} runs/side; machine: {platform.machine()}, {os.cpu_count()} cores shared "
             f"(load avg at start {os.getloadavg()[0]:.1f}), 1 torch thread; {canary.describe()}",
             "claim | bug | true eps | curve | caught (eps_hat > claim) | runs/side needed per seed (- = not caught at top) | "
             "eps_hat per seed (at that N) | variants | seconds"]
    print("\n".join(lines), flush=True)
    for claim in args.claims:
        for bug in args.bugs:
            t0 = time.perf_counter()
            needed = {c: [] for c in args.curves}
            eh = {c: [] for c in args.curves}
            var = []
            for seed in range(args.correct_seeds if bug == "correct" else args.seeds):
                fw, init, scaling = VARIANTS[seed % len(VARIANTS)]
                var.append(f"{fw}/{init}/{scaling}")
                tr = PlainTrainer(claim, bug, 10, len(y), framework=fw, init=init, scaling=scaling)
                ladder = args.ladder[-1:] if bug == "correct" else args.ladder
                si, so = np.zeros(0), np.zeros(0)
                got: dict[str, tuple[int, float]] = {}
                for N in ladder:
                    a, b = run_scores(tr, X, y, canary, N - si.size, 1000 * seed + int(claim), start=si.size)
                    si, so = np.concatenate([si, a]), np.concatenate([so, b])
                    for c in args.curves:
                        if c not in got or got[c][1] <= claim:
                            got[c] = (N, curve_epsilon(c, si, so, claim, len(y), args.level))
                    if all(got[c][1] > claim for c in args.curves):
                        break
                for c in args.curves:
                    needed[c].append(str(got[c][0]) if got[c][1] > claim else "-")
                    eh[c].append(f"{got[c][1]:.2f}")
            te = true_epsilon(len(y), claim, bug)
            for c in args.curves:
                row = (f"{claim:g} | {bug} | {'inf' if math.isinf(te) else f'{te:.2f}'} | {c} | "
                       f"{sum(n != '-' for n in needed[c])}/{len(needed[c])} | {' '.join(needed[c])} | "
                       f"{' '.join(eh[c])} | {', '.join(var)} | {time.perf_counter() - t0:.0f}")
                print(row, flush=True)
                lines.append(row)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
