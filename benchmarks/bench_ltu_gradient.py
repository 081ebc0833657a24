"""Benchmark: the gradient LTU attacker's per-sample gradient norms of a ``torch_mlp`` head (issue 43).

The plain way (``torch.func``'s vmap of grad, every per-sample gradient materialised: what the attacker did before,
:func:`privaudit.testing.scoring_reference.torch_grad_norms_vmap`) against the library's one batched forward and
backward with the linear-layer identity in float64 (:func:`privaudit.attacks.ltu_gradient._torch_grad_norms`), on
the default ``mlp`` defender (hidden 64) fitted for 2 epochs on ``--n`` × ``--d`` × 10 synthetic rows, all rows scored
(the LTU stage scores the Defender and Reserved sets). Arms alternate after one warm-up call each, fastest of
``--repeats``, on one torch thread (the stage's scoring runs beside its workers); the largest relative difference
between the arms is reported (float32 against float64; the float64 arm equals autograd's per-sample gradients in
float64 to 1e-12, ``tests/attacks/test_ltu_evaluation.py``).

Run:  PYTHONPATH=src:. python benchmarks/bench_ltu_gradient.py [--n 50000] [--d 512] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.pairs import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from privaudit.attacks.ltu_gradient import _torch_grad_norms
    from privaudit.defenders.registry import make_defender, validate_defender_spec
    from privaudit.testing.scoring_reference import torch_grad_norms_vmap

    torch.set_num_threads(1)
    g = np.random.default_rng(0)
    centers = g.normal(size=(10, args.d))
    y = g.integers(0, 10, args.n)
    X = (centers[y] * 0.3 + g.normal(size=(args.n, args.d))).astype(np.float32)
    spec = validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [64], "epochs": 2, "batch_size": 64,
                                   "lr": 0.05, "randomness": "unseeded"}, where="defenders[1]")
    model = make_defender(spec, 10).fit(X[:5000], y[:5000], 1)
    arms = {"vmap of grad": lambda: torch_grad_norms_vmap(model.net, X, y),
            "linear-layer identity": lambda: _torch_grad_norms(model, X, y)}
    times: dict[str, list[float]] = {k: [] for k in arms}
    out: dict[str, np.ndarray] = {}
    for name, call in arms.items():
        out[name] = call()  # warm-up
    for _ in range(args.repeats):
        for name, call in arms.items():
            t = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t)
    a, b = out["vmap of grad"], out["linear-layer identity"]
    rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
    lines = [f"gradient attacker norms, torch_mlp hidden 64, {args.n} x {args.d} x 10, one torch thread, "
             f"load {os.getloadavg()[0]:.2f}; fastest of {args.repeats}, alternating",
             f"vmap of grad (before)         {min(times['vmap of grad']):8.3f} s",
             f"linear-layer identity (now)   {min(times['linear-layer identity']):8.3f} s   "
             f"x{min(times['vmap of grad']) / min(times['linear-layer identity']):.1f}",
             f"relative difference, median {np.median(rel):.1e}, 99th percentile {np.quantile(rel, 0.99):.1e}, largest "
             f"{rel.max():.1e} (float32 against float64), at a norm of {b[np.argmax(rel)]:.1e} (the 1st percentile "
             f"of the norms: {np.quantile(b, 0.01):.1e})"]
    report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
