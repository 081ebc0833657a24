"""Benchmark: does testing a dp_sgd claim against its own subsampled-Gaussian curve cost tightness?

Issue 33 replaced the gated GDP view of the many-run black-box audit by the certified point tested
against the claim's own trade-off curve (for privaudit's ``dp_sgd``: the PLD curve of its σ, q, T,
:class:`privaudit.stats.tradeoff.SubsampledGaussianFamily`). This compares the two on the same scores.

Scores are drawn from the **last-iterate mechanism** of the default digits head (Steinke et al. 2024
§3, the ground truth of ``tests/blackbox/test_blackbox_audit.py``): score = Σ_t B_t + N(0, Tσ²),
B_t ~ Bernoulli(q) with the canary, N(0, Tσ²) without; q = 64/899, T = 280, σ the recipe's at each
claim. This is a simulation of the final-model statistic, not trained models: the trained-model
numbers of docs/results.md "Many-run black-box audit" come from ``bench_blackbox_honest.py``.

Per claim, ``--audits`` audits of ``--runs`` scores per side (the pipeline's 2,000), tune share 0.2,
level 0.05/6 (the default budget's share): mean ε̂/ε of the GDP view and of the claim-curve bound,
and how often the claim-curve bound refutes the honest claim.

Run:  nice python benchmarks/bench_claim_tightness.py --audits 50 --out benchmarks/results/claim_curve_tightness.txt
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from privaudit.stats.claim_runs import certify_claim_scores
from privaudit.stats.gdp_runs import certify_scores
from privaudit.stats.tradeoff import SubsampledGaussianFamily

T, Q, DELTA = 280, 64 / 899, 1e-5
#: (opacus PRV claim, σ) of the digits dp_sgd head at targets 1, 2, 4, 8 (docs/results.md, "Many-run black-box audit")
ROWS = ((0.997, 4.648), (1.998, 2.578), (3.994, 1.538), (7.998, 1.015))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--audits", type=int, default=50)
    ap.add_argument("--runs", type=int, default=2000, help="scores per side")
    ap.add_argument("--level", type=float, default=0.05 / 6)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    lines = ["# claim-curve bound vs GDP view on the last-iterate mechanism of the digits dp_sgd head (simulated scores)",
             f"# {args.audits} audits per claim, {args.runs} runs per side, tune 0.2, level {args.level:.4g}, seed "
             f"{args.seed}; machine {platform.machine()}, CPU only", "",
             "| claimed eps | sigma | mean GDP view / eps | mean claim-curve / eps | claim refuted | seconds |",
             "| --- | --- | --- | --- | --- | --- |"]
    for eps, sigma in ROWS:
        fam = SubsampledGaussianFamily(1.0 / sigma, sample_rate=Q, steps=T)
        rng = np.random.default_rng([args.seed, int(eps * 1000)])
        s = sigma * np.sqrt(T)
        g_r, c_r, refuted, t0 = [], [], 0, time.perf_counter()
        for _ in range(args.audits):
            s_in = rng.binomial(T, Q, args.runs) + rng.normal(0.0, s, args.runs)
            s_out = rng.normal(0.0, s, args.runs)
            g, _, _, _ = certify_scores(s_in, s_out, tune_fraction=0.2, level=args.level, delta=DELTA)
            c = certify_claim_scores(s_in, s_out, fam, tune_fraction=0.2, level=args.level, delta=DELTA)
            g_r.append(g.eps_lower_bound_gdp / eps)
            c_r.append(c.eps_lower_bound / eps)
            refuted += c.point.refutes_claim
        lines.append(f"| {eps} | {sigma} | {np.mean(g_r):.3f} | {np.mean(c_r):.3f} | {refuted} / {args.audits} | "
                     f"{time.perf_counter() - t0:.0f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
