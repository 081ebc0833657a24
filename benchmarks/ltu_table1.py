"""Reproduce the shape of LTU Table 1 (Pedersen et al. 2022): sklearn zoo × 3 randomness levels.

Utility (Eq. 2) and Privacy (Eq. 1) per cell with the paper's Table 1 attacker, the black-box
LTU attacker (3) of Fig. 2 = ``retrain`` (mock defenders with the same trainer), N rounds,
averaged over trials (each trial: a fresh random Defender/Reserved split and a fresh defender
training seed). Defender and Reserved sets have 1600 samples each where the data set allows
(digits has 1797 samples: the whole set is split in halves).

    python benchmarks/ltu_table1.py --dataset digits
    python benchmarks/ltu_table1.py --dataset location --location-path ../shared/data/location.tgz

Writes ``benchmarks/results/table1_<dataset>.csv`` (model, randomness, utility, utility_stderr,
privacy, privacy_stderr, trials, rounds), one row per cell, rewritten after every cell.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from privaudit.attacks.ltu import LtuData, run_attacker
from privaudit.attacks.ltu_retrain import RetrainAttacker
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.sklearn_zoo import ESTIMATORS
from privaudit.seeding import int_seed, rng_for
from privaudit.stats import ltu_utility

LEVELS = ("fixed", "shuffled", "unseeded")


def load(dataset: str, location_path: str | None) -> tuple[np.ndarray, np.ndarray, int]:
    if dataset == "digits":
        from privaudit.data.sources.embedded import load_digits_source

        src = load_digits_source()
    else:
        from privaudit.data.sources.location import load_location

        if not location_path:
            raise ValueError("--location-path is required for --dataset location")
        src = load_location(Path(location_path))
    X = src.X.reshape(src.n, -1).astype(np.float32)
    return X, src.y, int(src.meta["n_classes"])


def split(n: int, per_side: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = rng.permutation(n)
    k = min(per_side, n // 2)
    return perm[:k], perm[k:2 * k] if 2 * k <= n else perm[k:]


def cell(X: np.ndarray, y: np.ndarray, C: int, estimator: str, level: str, trial: int, rounds: int,
         n_jobs: int, seed: int) -> tuple[float, float, float, float]:
    """One trial of one cell: (utility, utility_stderr, privacy, privacy_stderr)."""
    rng = rng_for(seed, "table1", trial)
    d_idx, r_idx = split(len(y), 1600, rng)
    rows = np.concatenate([d_idx, r_idx])
    Xs, ys = X[rows], y[rows]
    is_def = np.zeros(len(rows), bool)
    is_def[: len(d_idx)] = True
    spec = validate_defender_spec({"name": f"{estimator}-{level}", "kind": "sklearn", "estimator": estimator,
                                   "randomness": level})
    model = make_defender(spec, n_classes=C)
    model.fit(Xs[is_def], ys[is_def], seed=int_seed(seed, "table1", estimator, level, trial))
    proba = model.predict_proba(Xs)
    acc_r = float((proba[~is_def].argmax(1) == ys[~is_def]).mean())
    u, ue = ltu_utility(acc_r, C, int((~is_def).sum()), error="paper")  # Table 1 as printed (Eq. 2's c·se)
    data = LtuData(X=Xs, y=ys, proba=proba, is_defender=is_def, ids=rows.astype(str),
                   train_rows=np.flatnonzero(is_def), n_classes=C, spec=spec, model=model)
    res, _, _ = run_attacker(RetrainAttacker(n_jobs), data, rounds, rng_for(seed, "table1", "ltu", estimator, level, trial))
    return u, ue, res.privacy, res.privacy_stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=("digits", "location"), default="digits")
    ap.add_argument("--location-path", default="../shared/data/location.tgz")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--append", action="store_true", help="keep rows of other cells already in the csv")
    args = ap.parse_args()
    X, y, C = load(args.dataset, args.location_path)
    out = args.out or Path(__file__).parent / "results" / f"table1_{args.dataset}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = pd.read_csv(out).to_dict("records") if args.append and out.is_file() else []
    for est in args.estimators.split(","):
        for level in args.levels.split(","):
            t0 = time.time()
            per = [cell(X, y, C, est, level, t, args.rounds, args.n_jobs, args.seed) for t in range(args.trials)]
            u, ue, p, pe = (np.array(v) for v in zip(*per))
            row = {"model": est, "randomness": level, "utility": u.mean(),
                   "utility_stderr": math.sqrt((ue**2).mean() / len(per)), "privacy": p.mean(),
                   "privacy_stderr": math.sqrt((pe**2).mean() / len(per)), "trials": len(per), "rounds": args.rounds}
            rows = [r for r in rows if (r["model"], r["randomness"]) != (est, level)] + [row]
            tmp = out.with_suffix(".tmp")
            pd.DataFrame(rows).to_csv(tmp, index=False)
            tmp.replace(out)
            print(f"{est:20s} {level:9s} utility={row['utility']:.3f} privacy={row['privacy']:.3f}±{row['privacy_stderr']:.3f}"
                  f"  ({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
