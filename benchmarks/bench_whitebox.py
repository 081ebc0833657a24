"""Benchmark: white-box DP-SGD audit (privaudit.hooks + privaudit.audits.whitebox) — tightness, bugs, false alarms.

(i)   Tightness on digits: privaudit's own ``dp_sgd`` linear head (epochs 20, batch 64, lr 0.5,
      C 1.0, δ 1e-5, PRV accountant) on the standardised digits Defender half (898 × 64, split
      like the pipeline: stratified, defender_fraction 0.5), ε ∈ {1, 2, 4, 8}; ε = the defender's
      claimed_epsilon(), ε̂ from ``runs`` audit runs (1 and 4).
(ii)  Planted-bug catalogue (src/privaudit/testing/planted/opacus_bugs.py) on the same digits half with the
      same recipe numbers, each claiming ε = 1: true ε by the accountant with the buggy σ/q where
      it applies, ε̂ (1 run), failed checks, caught (ε̂ > claim or a failed check).
(iii) False alarms: the correct catalogue recipe on 200 × 8 blobs (5 epochs, batch 20, claim =
      its accountant ε) audited ``--reps`` times with RDP and ``--reps-prv`` times with PRV (full
      whitebox_audit, 1 run each, level 0.05); flagged = ε̂ > claim or a failed check.

Run:  PRIVAUDIT_TORCH_THREADS=1 nice .venv/bin/python benchmarks/bench_whitebox.py [--reps 1000] [--out FILE]
      (table (i) alone: ``--tightness-only --runs 3``)
"""

from __future__ import annotations

import argparse
import io
import math
import os
import platform
import sys
import time
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import torch
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # privaudit.testing.planted.opacus_bugs

from privaudit.data.split import stratified_split  # noqa: E402
from privaudit.defenders.registry import make_defender, validate_defender_spec  # noqa: E402
from privaudit.features.identity import standardize  # noqa: E402
from privaudit.audits.whitebox import defender_trainer, python_trainer, whitebox_audit  # noqa: E402
from privaudit.testing.planted.opacus_bugs import BUGS, CATALOGUE, CORRECT, tiny_data  # noqa: E402

RECIPE = dict(epochs=20, batch_size=64, lr=0.5, max_grad_norm=1.0, delta=1e-5, accountant="prv")


def digits_half(seed: int = 2026) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    split = stratified_split(np.arange(len(y)), y, 0.5, np.random.default_rng(seed))
    keep = (split["role"] == "defender").to_numpy()
    return standardize(X)[keep], y[keep].astype(np.int64)


def fmt(x: float | str) -> str:
    if isinstance(x, str):
        return x
    return "inf" if math.isinf(x) else f"{x:.3f}"


def tightness(X: np.ndarray, y: np.ndarray, runs_list: list[int]) -> None:
    print("(i) tightness: dp_sgd linear head on digits (n = %d, d_in = %d), epochs 20, batch 64, lr 0.5, C 1.0, "
          "delta 1e-5, PRV; level 0.05" % X.shape)
    print(f"{'eps':>4} {'claimed eps':>11} {'sigma':>7} {'runs':>4} {'eps_hat':>8} {'eps_hat/eps':>11} "
          f"{'eps_point':>9} {'z_U':>7} {'q_L/q':>6} {'checks':>6} {'seconds':>7}")
    for eps in (1.0, 2.0, 4.0, 8.0):
        spec = validate_defender_spec({"name": f"dpsgd_eps{eps:g}", "kind": "dp_sgd", "epsilon": eps,
                                       "hidden": [], "randomness": "unseeded", **RECIPE}, where="bench")
        ref = make_defender(spec, 10)
        sigma = ref.noise_multiplier(len(y))
        q = ref.sample_rate(len(y))
        claimed = float(ref.fit(X, y, seed=0).claimed_epsilon())
        for runs in runs_list:
            t0 = time.perf_counter()
            res = whitebox_audit(defender_trainer(lambda: make_defender(spec, 10)), X, y, runs=runs,
                                 delta=RECIPE["delta"], accountant="prv", seed=int(eps * 100 + runs), level=0.05)
            sec = time.perf_counter() - t0
            print(f"{eps:>4g} {claimed:>11.3f} {sigma:>7.3f} {runs:>4d} {res.epsilon:>8.3f} "
                  f"{res.epsilon / claimed:>11.3f} {res.epsilon_point:>9.3f} {res.noise_multiplier:>7.3f} "
                  f"{res.sample_rate_lower / q:>6.3f} {'pass' if res.checks_passed else 'FAIL':>6} {sec:>7.1f}")


def catalogue(X: np.ndarray, y: np.ndarray, label: str, options: dict) -> None:
    n_classes = int(y.max()) + 1
    print(f"(ii) planted-bug catalogue on {label} (n = {len(y)}), claim eps = 1, delta 1e-5, "
          f"{options.get('accountant', 'prv')}, 1 audit run each")
    print(f"{'recipe':<22} {'true eps':>9} {'eps_hat':>8} {'eps_point':>9} {'caught':>6}  failed checks / reasons")
    for name, rec in CATALOGUE.items():
        t0 = time.perf_counter()
        res = whitebox_audit(python_trainer(rec.train, n_classes, **options), X, y, runs=1,
                             accountant=options.get("accountant", "prv"), seed=7, level=0.05)
        true = rec.true_epsilon(len(y), **options)
        caught = res.overclaims(1.0) if name != "correct" else res.overclaims(float(true))
        verdict = ("yes" if caught else "no") if name != "correct" else ("FALSE ALARM" if caught else "passes")
        why = ", ".join(res.failed_checks) or ("ε̂ > claim" if res.epsilon > 1.0 else "-")
        print(f"{name:<22} {fmt(true):>9} {fmt(res.epsilon):>8} {fmt(res.epsilon_point):>9} {verdict:>6}  {why}"
              f"   [{res.bound_source}; {time.perf_counter() - t0:.1f}s]")


def false_alarms(reps: int, accountant: str) -> None:
    X, y = tiny_data()
    options = dict(accountant=accountant)
    claim = float(CORRECT.true_epsilon(len(y), **options))
    flagged = above = bound_miss = 0
    ratios = []
    by_check: dict[str, int] = {}
    t0 = time.perf_counter()
    for i in range(reps):
        res = whitebox_audit(python_trainer(CORRECT.train, 3, **options), X, y, runs=1, accountant=accountant,
                             level=0.05, seed=10_000 + i)
        flagged += res.overclaims(claim)
        above += res.epsilon > claim
        bound_miss += res.epsilon > claim and res.checks_passed
        for name in res.failed_checks:
            by_check[name] = by_check.get(name, 0) + 1
        ratios.append(res.epsilon / claim)
    lo, hi = stats.binomtest(flagged, reps).proportion_ci(0.99, method="exact")
    print(f"(iii) false alarms: correct recipe on 200 × 8 blobs (5 epochs, batch 20, {accountant}, claim eps = {claim:.3f}), "
          f"{reps} full audits at level 0.05")
    print(f"flagged {flagged}/{reps} = {flagged / reps:.3f} (99% CI [{lo:.3f}, {hi:.3f}]); eps_hat > claim in "
          f"{above}/{reps} ({bound_miss} with every check passed, i.e. a missed s_U/q_L bound; the others are "
          f"eps_hat = inf set by a failed check); eps_hat/claim median {np.median(ratios):.3f} [min {np.min(ratios):.3f}, "
          f"max {np.max(ratios):.3f}]; {time.perf_counter() - t0:.0f}s")
    print("failed checks: " + (", ".join(f"{k} {v}" for k, v in sorted(by_check.items())) or "none")
          + f" (each tested at level 0.05/9 = {0.05 / 9:.4f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="false-alarm audits with the RDP accountant (>= 200)")
    ap.add_argument("--reps-prv", type=int, default=200, help="false-alarm audits with the PRV accountant")
    ap.add_argument("--runs", type=int, nargs="+", default=[1, 2, 4], help="audit runs in the tightness table")
    ap.add_argument("--tightness-only", action="store_true",
                    help="only table (i), e.g. --runs 3 (the pipeline pools the release run and 2 audit runs)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: benchmarks/results/whitebox_digits.txt (whitebox_tightness_digits.txt with "
                         "--tightness-only)")
    args = ap.parse_args()
    if args.out is None:
        name = "whitebox_tightness_digits.txt" if args.tightness_only else "whitebox_digits.txt"
        args.out = ROOT / "benchmarks" / "results" / name
    torch.set_num_threads(int(os.environ.get("PRIVAUDIT_TORCH_THREADS", "1")))
    warnings.filterwarnings("ignore")
    buf = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            sys.__stdout__.write(s)
            sys.__stdout__.flush()
            return buf.write(s)

    with redirect_stdout(Tee()):
        import opacus
        import sklearn

        print(f"machine: {platform.platform()}, {os.cpu_count()} CPU cores ({platform.processor() or 'cpu'}), "
              f"no GPU used; torch {torch.__version__} ({torch.get_num_threads()} thread), opacus "
              f"{opacus.__version__}, sklearn {sklearn.__version__}, python {platform.python_version()}")
        t0 = time.perf_counter()
        X, y = digits_half()
        tightness(X, y, args.runs)
        print()
        if args.tightness_only:
            print(f"total {time.perf_counter() - t0:.0f}s")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(buf.getvalue())
            return
        catalogue(X, y, "digits (standardised Defender half, 64 features, 10 classes), epochs 20, batch 64, "
                        "lr 0.5, C 1", dict(epochs=20, batch_size=64, lr=0.5, accountant="prv"))
        print()
        Xt, yt = tiny_data()
        catalogue(Xt, yt, "200 × 8 blobs (3 classes), epochs 5, batch 20 — the test-suite setting",
                  dict(accountant="prv"))
        print()
        false_alarms(args.reps, "rdp")
        print()
        false_alarms(args.reps_prv, "prv")
        print(f"\ntotal {time.perf_counter() - t0:.0f}s; bugs in the catalogue: {len(BUGS)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(buf.getvalue())


if __name__ == "__main__":
    main()
