"""The per-sample risk's bootstrap interval: numpy's nanpercentile against privaudit's vectorised one.

``risk_from_confidences`` (what the LTU stage runs per defender after its reference fits) on synthetic
confidences of the LTU stage's shapes: ``--n`` samples (half of them the Defender set), ``--k`` reference
models each trained on a random half, ``bootstrap`` 200 resamples (the default). Arm "numpy" replaces
:func:`privaudit.stats.percentiles.nanpercentile_columns` with ``np.nanpercentile(a, q, axis=0)`` (the code
before it, the plain way); arm "vectorised" is the library. Alternating pairs after one warm-up of each; every
pair must give the same bits (the interval ends included). Wall seconds per call and their median ratio.

    python benchmarks/bench_risk_bootstrap.py [--n 10000] [--k 32] [--pairs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

import privaudit.attacks.sample_risk as sample_risk
from privaudit.attacks.sample_risk import RiskOptions, risk_from_confidences
from privaudit.stats.percentiles import nanpercentile_columns


def numpy_way(a: np.ndarray, q: list[float]) -> np.ndarray:
    return np.nanpercentile(a, q, axis=0)


def inputs(n: int, k: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    inside = rng.random((n, k)) < 0.5
    base = rng.normal(1.5, 1.0, n)[:, None]
    conf_ref = 1 / (1 + np.exp(-(base + 0.4 * inside + rng.normal(0, 0.5, (n, k)))))
    is_defender = np.zeros(n, bool)
    is_defender[: n // 2] = True
    conf_t = 1 / (1 + np.exp(-(base[:, 0] + 0.4 * is_defender + rng.normal(0, 0.5, n))))
    return conf_t, conf_ref, inside, is_defender


def one(arm: str, args: tuple[np.ndarray, ...]) -> tuple[float, bytes]:
    sample_risk.nanpercentile_columns = numpy_way if arm == "numpy" else nanpercentile_columns
    t0 = time.perf_counter()
    r = risk_from_confidences(*args, options=RiskOptions(), rng=np.random.default_rng(0))
    wall = time.perf_counter() - t0
    return wall, r.risk_low.tobytes() + r.risk_high.tobytes() + r.p_value.tobytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    data = inputs(a.n, a.k, 0)
    for arm in ("numpy", "vectorised"):
        one(arm, data)
    walls: dict[str, list[float]] = {"numpy": [], "vectorised": []}
    ratios = []
    for _ in range(a.pairs):
        (wn, bn), (wv, bv) = one("numpy", data), one("vectorised", data)
        if bn != bv:
            raise SystemExit("the two arms gave different bits")
        walls["numpy"].append(wn)
        walls["vectorised"].append(wv)
        ratios.append(wn / wv)
    sample_risk.nanpercentile_columns = nanpercentile_columns
    lines = [
        f"bench_risk_bootstrap: risk_from_confidences, n={a.n}, K={a.k}, bootstrap {RiskOptions().bootstrap}; "
        f"{platform.machine()} {os.cpu_count()} cpus; same bits in every pair",
        *(f"{arm:11s} " + " ".join(f"{w:.3f}" for w in ws) + " s" for arm, ws in walls.items()),
        f"ratio numpy/vectorised per pair: {' '.join(f'{r:.2f}' for r in ratios)} (median {np.median(ratios):.2f})",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
