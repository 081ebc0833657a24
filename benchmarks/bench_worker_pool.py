"""Benchmark: a stage's worker pool forked from its process against joblib's default (loky) pool.

The plain way a user (and privaudit until 2026-11-28) spreads sequential fits over processes is
``joblib.Parallel(n_jobs)``: loky starts fresh interpreters that import numpy, torch, scikit-learn and privaudit
again. :func:`privaudit.repro.worker_pool.map_in_processes` forks them from a process that has imported those
already (as every stage has by the time it starts workers). Each arm runs in its own fresh process that first
imports what a canary stage imports, then times, from the pool's start to the last result, ``n_jobs`` items of
one scikit-learn logistic-regression fit each (the LTU reference models' fit function); arms alternate.

Usage: ``PYTHONPATH=src:. python benchmarks/bench_worker_pool.py [--pairs 3] [--jobs 2] [--out FILE]``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.pairs import pair_summary, report  # noqa: E402

_ARM = r"""
import json, sys, time
import numpy as np
import torch, sklearn.linear_model
import privaudit.canaries.runner, privaudit.attacks.mia_reference
from privaudit.repro import worker_pool as wp
sys.path.insert(0, {tests!r})
from worker_pool_probe import logreg_proba
rng = np.random.default_rng(0)
X = rng.normal(size=(900, 64)).astype(np.float32); y = rng.integers(0, 3, size=900)
logreg_proba(X, y, 0)  # the stage has fitted in its own process before it starts workers
jobs = {jobs}
start = time.perf_counter()
out = list(wp.map_in_processes(logreg_proba, [(s,) for s in range(jobs)], jobs, shared=(X, y)))
print(json.dumps({{"seconds": time.perf_counter() - start, "refusal": wp.fork_refusal()}}))
"""


def _arm(fork: bool, jobs: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "PRIVAUDIT_FORK_WORKERS": "1" if fork else "0"}
    code = _ARM.format(tests=str(ROOT / "tests"), jobs=jobs)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    loky, fork = [], []
    for _ in range(args.pairs):
        loky.append(float(_arm(False, args.jobs)["seconds"]))
        forked = _arm(True, args.jobs)
        if forked["refusal"] is not None:
            raise SystemExit(f"forked workers refused here: {forked['refusal']}")
        fork.append(float(forked["seconds"]))
    report(pair_summary(
        f"bench_worker_pool: {args.jobs} workers, one logistic-regression fit (900 x 64, 3 classes) each, from the "
        "pool's start to the last result, in a process that imported torch, scikit-learn and privaudit",
        ("loky (joblib's default: fresh interpreters)", loky), ("forked (privaudit.repro.worker_pool)", fork),
        load_before), args.out)

if __name__ == "__main__":
    main()
