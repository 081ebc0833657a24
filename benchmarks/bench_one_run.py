"""Benchmark: black-box one-run audit (Steinke, Nasr & Jagielski 2023; f-DP analysis of Mahloujifar,
Melis & Chaudhuri) of training recipes on digits, with input-space canaries as ordinary rows.

Sections (all on sklearn digits, 900 standardised training rows, 10 classes, 64 features):

1. the recipe table: plain numpy DP-SGD linear heads (20 epochs, batch 64, lr 0.5, C = 1, RDP
   accountant) claiming eps in {1, 2, 4, 8}, the planted bugs (c) no clipping and (d) no noise
   claiming eps = 1, and two recipes without a claim (sklearn logistic regression, a torch MLP);
   ``--seeds`` independent audits (one training run each) per recipe, default settings
   (``canaries="auto"`` = 160, level 0.05, delta 1e-5);
2. canary designs: power of each design and canary count on bugs (c)/(d) and correct eps = 8;
3. simulations with mechanisms of known privacy (>= 1000 repetitions): exactly mu-GDP Gaussian
   scores, eps-DP randomized response, and the full pipeline on an exactly mu-GDP trainer.

Run:  nice python benchmarks/bench_one_run.py [--seeds 5] [--sim-reps 1000] [--quick]
Writes benchmarks/results/one_run_digits.txt (and prints it).
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from privaudit.defenders.registry import make_defender, validate_defender_spec  # noqa: E402
from privaudit.audits.one_run import bounds_from_losses, one_run_audit  # noqa: E402
from privaudit.stats.fdp_one_run import (  # noqa: E402
    eps_delta_blowup_inverse,
    fdp_one_run_rejects,
    gdp_blowup_inverse,
    gdp_epsilon,
)
from privaudit.testing.planted.digits import digits_train  # noqa: E402
from privaudit.testing.planted.blackbox_trainers import (  # noqa: E402
    accountant_epsilon,
    recipe,
    train_dp_sgd,
    train_gaussian_class_sums,
)

DELTA, LEVEL = 1e-5, 0.05


def _kind(spec: dict):  # noqa: ANN202
    sp = validate_defender_spec({"name": "bench", **spec}, where="defenders[0]")
    return lambda X, y, s: make_defender(sp, 10).fit(X, y, s)


def recipes() -> list[tuple[str, float | None, str, object]]:
    """(name, claimed eps, true eps as text, fit)."""
    out: list[tuple[str, float | None, str, object]] = []
    n_typ = 980  # 900 rows + ~80 included canaries: the q and steps the accountant sees
    for eps in (1.0, 2.0, 4.0, 8.0):
        q, steps, sigma = recipe(n_typ, eps, DELTA, 20, 64)
        true = f"<={accountant_epsilon(sigma, q, steps, DELTA):.2f}"
        out.append((f"DP-SGD (correct, sigma={sigma:.2f})", eps, true,
                    (lambda e: lambda X, y, s: train_dp_sgd(X, y, 10, s, epsilon=e))(eps)))
    out.append(("DP-SGD bug (c): no clipping", 1.0, "inf",
                lambda X, y, s: train_dp_sgd(X, y, 10, s, epsilon=1.0, bug="no_clip")))
    out.append(("DP-SGD bug (d): no noise", 1.0, "inf",
                lambda X, y, s: train_dp_sgd(X, y, 10, s, epsilon=1.0, bug="no_noise")))
    out.append(("sklearn LogisticRegression", None, "no DP", _kind({"kind": "logistic_regression"})))
    out.append(("torch MLP (64 hidden, 30 ep)", None, "no DP", _kind({"kind": "torch_mlp", "hidden": [64]})))
    return out


def _fmt(a: list[float]) -> str:
    return f"{np.median(a):5.2f} [{min(a):.2f},{max(a):.2f}]"


def section_recipes(d, seeds: int, lines: list[str]) -> None:  # noqa: ANN001
    lines.append(f"## 1. Recipes (one training run per audit, {seeds} audits = seeds 0..{seeds - 1}; "
                 "median [min,max])")
    lines.append("eps_hat steinke: Steinke et al. Thm (assumption-free); eps_hat fdp: eps at delta of the largest "
                 "rejected mu-GDP curve (assumes a Gaussian-shaped trade-off curve, never gate on it: see 3b); "
                 "flagged: eps_hat steinke > claim")
    lines.append("true eps: the RDP accountant's eps for the recipe (an upper bound); s/audit: canaries + one training "
                 "run + scoring + all bounds; the opacus sigma calibration (~1-2 s per distinct sample rate) is cached "
                 "across audits and not included")
    hdr = (f"{'recipe':36s} {'claim':>5s} {'true eps':>8s} | {'eps_hat steinke':>18s} | {'eps_hat fdp (GDP)':>18s} | "
           f"{'mu_hat':>18s} | {'eps_hat fdp curve':>18s} | {'flagged':>7s} | {'canaries':>8s} | "
           f"{'correct/guesses':>15s} | {'s/audit':>7s}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for name, claim, true, fit in recipes():
        rs = []
        for s in range(seeds):
            t = time.perf_counter()
            r = one_run_audit(fit, d.X, d.y, 10, seed=s, level=LEVEL, delta=DELTA,  # type: ignore[arg-type]
                              method="fdp")
            rs.append((r, time.perf_counter() - t))
        e = [r.eps_lower_bound for r, _ in rs]
        flagged = f"{sum(x > claim for x in e)}/{seeds}" if claim is not None else "-"
        cg = f"{int(np.median([r.correct for r, _ in rs]))}/{int(np.median([r.guesses for r, _ in rs]))}"
        lines.append(f"{name:36s} {claim if claim else '-':>5} {true:>8s} | {_fmt(e):>18s} | "
                     f"{_fmt([r.eps_lower_bound_fdp for r, _ in rs]):>18s} | "
                     f"{_fmt([r.mu_lower_bound for r, _ in rs]):>18s} | "
                     f"{_fmt([r.eps_lower_bound_fdp_curve for r, _ in rs]):>18s} | {flagged:>7s} | "
                     f"{rs[0][0].canaries:>8d} | {cg:>15s} | {np.mean([t for _, t in rs]):7.2f}")
        print(lines[-1], flush=True)
    lines.append("")


def section_designs(d, seeds: int, lines: list[str], quick: bool) -> None:  # noqa: ANN001
    lines.append(f"## 2. Canary designs (tail_dim 16; median eps_hat steinke over {seeds} seeds, and median accuracy "
                 "of the best grid point)")
    cases = [("bug (c) no clip", "no_clip", 1.0), ("bug (d) no noise", "no_noise", 1.0), ("correct eps=8", None, 8.0)]
    configs = [(des, 4.0, m) for des in ("tail_cells", "tail_random", "tail_sign", "tail_aligned")
               for m in ((160,) if quick else (80, 160, 320))]
    configs += [("tail_cells", sc, 160) for sc in ((1.0,) if quick else (1.0, 2.0, 8.0))]
    hdr = f"{'design':13s} {'scale':>5s} {'m':>4s} | " + " | ".join(f"{c[0]:>22s}" for c in cases)
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for des, sc, m in configs:
        cells = []
        for _, bug, eps in cases:
            fit = (lambda b, e: lambda X, y, s: train_dp_sgd(X, y, 10, s, epsilon=e, bug=b))(bug, eps)
            rs = [one_run_audit(fit, d.X, d.y, 10, seed=s, canaries=m, level=LEVEL, design=des, scale=sc)
                  for s in range(seeds)]
            acc = [max(g[2] / (g[0] + g[1]) for g in r.grid) for r in rs]
            cells.append(f"{np.median([r.eps_lower_bound for r in rs]):5.2f} (acc {np.median(acc):.2f})")
        lines.append(f"{des:13s} {sc:5g} {m:4d} | " + " | ".join(f"{c:>22s}" for c in cells))
        print(lines[-1], flush=True)
    lines.append("")


def _critical(k: int, rejects) -> int:  # noqa: ANN001
    """Smallest number of correct guesses c in [0, k] that rejects (rejection is monotone in c); k + 1 if none."""
    return bisect.bisect_left(range(k + 1), True, key=rejects)


def _counts(m: int, kp: int, reps: int, rng: np.random.Generator, draw) -> np.ndarray:  # noqa: ANN001
    out = []
    for _ in range(max(1, reps // 500)):
        S = rng.random((500, m)) < 0.5
        Ss = np.take_along_axis(S, np.argsort(draw(S, rng), axis=1, kind="stable"), axis=1)
        out.append(Ss[:, :kp].sum(1) + (~Ss[:, m - kp:]).sum(1))
    return np.concatenate(out)


def section_simulations(d, reps: int, lines: list[str]) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    lines.append(f"## 3. Simulations with known privacy (level {LEVEL}, delta {DELTA})")
    lines.append("3a. size of each test at the TRUE parameter: P(C >= c*) over 20000 one-run experiments "
                 "(m = 1000 canaries, guesses = top/bottom k/2)")
    for mu in (0.5, 1.0, 2.0):
        for k in (100, 1000):
            c = _critical(k, lambda v: fdp_one_run_rejects(v, k, 1000, gdp_blowup_inverse(mu), level=LEVEL))
            C = _counts(1000, k // 2, 20000, rng, lambda S, r: -mu * S + r.standard_normal(S.shape))
            lines.append(f"  mu-GDP Gaussian scores mu={mu}: k={k:4d} c*={c:4d} size={np.mean(C >= c):.4f} "
                         f"(mean C {C.mean():.1f})")
    for eps in (1.0, 2.0):
        q = 1 / (1 + math.exp(-eps))
        def rr(S: np.ndarray, r: np.random.Generator, q: float = q) -> np.ndarray:
            return np.where(np.where(r.random(S.shape) < q, S, ~S), 0.0, 1.0) + 1e-3 * r.random(S.shape)

        for k in (200, 1000):
            c = _critical(k, lambda v: fdp_one_run_rejects(v, k, 1000, eps_delta_blowup_inverse(eps, DELTA),
                                                           level=LEVEL))
            C = _counts(1000, k // 2, 20000, rng, rr)
            lines.append(f"  eps-DP randomized response eps={eps}: (eps,delta)-curve k={k:4d} c*={c:4d} "
                         f"size={np.mean(C >= c):.4f}")
    print("\n".join(lines[-10:]), flush=True)

    lines.append(f"3b. end to end through bounds_from_losses (default grid, Bonferroni), {reps} runs each, m = 400")
    for mu in (1.0, 2.0):
        mus, st, cv = [], [], []
        for _ in range(reps):
            s = rng.random(400) < 0.5
            b = bounds_from_losses(-mu * s + rng.standard_normal(400), s, delta=DELTA, level=LEVEL, method="fdp")
            mus.append(b.mu_lower_bound)
            st.append(b.eps_lower_bound)
            cv.append(b.eps_lower_bound_fdp_curve)
        et = gdp_epsilon(mu, DELTA)
        lines.append(f"  mu-GDP mu={mu} (eps={et:.2f}): P(mu_hat>mu)={np.mean(np.array(mus) > mu):.4f} "
                     f"P(steinke>eps)={np.mean(np.array(st) > et):.4f} P(curve>eps)={np.mean(np.array(cv) > et):.4f}; "
                     f"mean mu_hat {np.mean(mus):.3f} -> eps_fdp {gdp_epsilon(float(np.mean(mus)), DELTA):.2f}, "
                     f"mean steinke {np.mean(st):.2f}")
        print(lines[-1], flush=True)
    for eps in (1.0, 2.0, 4.0):
        st, cv, gd = [], [], []
        q = 1 / (1 + math.exp(-eps))
        for _ in range(reps):
            s = rng.random(400) < 0.5
            losses = np.where(np.where(rng.random(400) < q, s, ~s), 0.0, 1.0) + 1e-3 * rng.random(400)
            b = bounds_from_losses(losses, s, delta=DELTA, level=LEVEL, method="fdp")
            st.append(b.eps_lower_bound)
            cv.append(b.eps_lower_bound_fdp_curve)
            gd.append(b.eps_lower_bound_fdp)
        lines.append(f"  eps-DP RR eps={eps}: P(steinke>eps)={np.mean(np.array(st) > eps):.4f} "
                     f"P(curve>eps)={np.mean(np.array(cv) > eps):.4f}; mean steinke {np.mean(st):.2f}, "
                     f"mean curve {np.mean(cv):.2f} | GDP-shape caveat: P(eps_fdp(GDP)>eps)="
                     f"{np.mean(np.array(gd) > eps):.4f}, mean {np.mean(gd):.2f}")
        print(lines[-1], flush=True)

    lines.append(f"3c. full pipeline (canaries + fit + scores) on an exactly mu-GDP trainer (Gaussian mechanism on "
                 f"clipped class sums), {reps} audits each")
    for mu in (0.5, 2.0):
        t = time.perf_counter()
        fit = (lambda u: lambda X, y, s: train_gaussian_class_sums(X, y, 10, s, mu=u))(mu)
        rs = [one_run_audit(fit, d.X, d.y, 10, seed=s, level=LEVEL, method="fdp") for s in range(reps)]
        et = gdp_epsilon(mu, DELTA)
        e = np.array([r.eps_lower_bound for r in rs])
        m_ = np.array([r.mu_lower_bound for r in rs])
        lines.append(f"  mu={mu} (eps={et:.2f}): P(steinke>eps)={np.mean(e > et):.4f} "
                     f"P(mu_hat>mu)={np.mean(m_ > mu):.4f}; "
                     f"mean steinke {e.mean():.2f} (max {e.max():.2f}), mean mu_hat {m_.mean():.3f} "
                     f"({(time.perf_counter() - t) / reps * 1000:.0f} ms/audit)")
        print(lines[-1], flush=True)
    lines.append("")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--design-seeds", type=int, default=3)
    ap.add_argument("--sim-reps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="fewer designs (a smoke run)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "one_run_digits.txt")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
    import torch

    torch.set_num_threads(1)
    d = digits_train()
    start = time.perf_counter()
    lines = [
        "# One-run black-box audit on digits (privaudit.audits.one_run)",
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, no GPU; "
        f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__} (1 thread); "
        f"load average at start {os.getloadavg()[0]:.1f} (shared machine: timings are upper bounds)",
        f"data: digits, {len(d.y)} standardised training rows, d = 64, 10 classes; defaults: canaries='auto' (160 = "
        f"16 tail directions x 10 labels, design tail_cells, scale 4), level {LEVEL}, delta {DELTA}, k-grid "
        "(k+,k-)/m in {(.05,.05),(.1,.1),(.25,.25),(.5,.5)} with Bonferroni level/4",
        "",
    ]
    section_recipes(d, args.seeds, lines)
    section_designs(d, args.design_seeds, lines, args.quick)
    section_simulations(d, args.sim_reps, lines)
    lines.append(f"total wall time {time.perf_counter() - start:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
