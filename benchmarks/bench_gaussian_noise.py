"""Benchmark: DP-SGD's Gaussian noise on the CPU — the native streams (``gaussian_noise.c``) against
``torch.randn``, alone and inside whole DP-SGD runs of the batched trainer.

1. The noise alone: one step's (M, P) noise, ``draw_noise`` (native) against the plain way,
   ``torch.randn(M, P, generator=g).mul_(scale)``, at torch's thread count and at one thread (a canary
   worker's), as alternating pairs; the median per-pair ratio and its range.
2. Whole DP-SGD runs (``train_heads``, linear heads, the fused kernel in both arms) with the noise
   native against the same runs with the noise from ``torch.randn`` (``privaudit.train.noise`` told the
   library is absent), at the shapes of the default audit's and the 10k × 128 benchmark's black-box
   runs (digits: n = 900, d = 64; 10k: n = 5 000, d = 128; 10 classes, batch 64) and of
   ``bench_many_heads.py``'s CIFAR-size row (50 000 × 512, batch 256).

Usage: ``python benchmarks/bench_gaussian_noise.py [--pairs 5] [--out FILE]``. Writes the table to
stdout (and ``--out``). Not a test: timings on a shared machine drift, so arms alternate.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from privaudit.train import DPSettings, HeadRecipe, TrainData, native, noise, train_heads
from privaudit.train.noise import draw_noise


def _time(fn, repeats: int = 3) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _pairs(a, b, pairs: int) -> tuple[float, float, list[float]]:  # noqa: ANN001
    ta, tb, ratios = [], [], []
    for _ in range(pairs):
        x, y = _time(a), _time(b)
        ta.append(x)
        tb.append(y)
        ratios.append(y / x)
    return statistics.median(ta), statistics.median(tb), ratios


def _torch_noise(out: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
    return torch.randn(out.shape, generator=gen, out=out).mul_(scale)


def noise_rows(pairs: int) -> list[str]:
    lines = ["1. one step's noise, (M, P) float32: native draw_noise vs torch.randn(...).mul_(scale)",
             f"{'M x P':>14} {'threads':>7} {'native ms':>10} {'torch ms':>9}  ratio torch/native (median; range)"]
    threads0 = torch.get_num_threads()
    for M, P in ((1000, 650), (1000, 1290), (1024, 5130)):
        out = torch.empty(M, P)
        for threads in sorted({threads0, 1}, reverse=True):
            torch.set_num_threads(threads)
            g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
            a, b, r = _pairs(lambda: draw_noise(out, g1, 0.1), lambda: _torch_noise(out, g2, 0.1), pairs)
            lines.append(f"{M:>6} x {P:<6} {threads:>7} {a * 1e3:>10.2f} {b * 1e3:>9.2f}  "
                         f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")
        torch.set_num_threads(threads0)
    return lines


def run_rows(pairs: int) -> list[str]:
    lines = ["2. whole DP-SGD runs of linear heads (train_heads, fused kernel in both arms): noise native vs torch.randn",
             f"{'shape':>26} {'models':>6} {'steps':>5} {'native s':>9} {'torch s':>8}  ratio (median; range)"]
    real = noise.linear_dp_kernel
    for name, n, d, batch, M, steps in (("digits 900x64", 900, 64, 64, 1000, 100),
                                        ("10k 5000x128", 5000, 128, 64, 1000, 100),
                                        ("cifar 50000x512", 50000, 512, 256, 256, 10)):
        g = torch.Generator().manual_seed(1)
        X, y = torch.randn(n, d, generator=g), torch.randint(0, 10, (n,), generator=g)
        q = batch / n
        recipe = HeadRecipe((), 1, batch, 0.5, dp=DPSettings(1.0, 1.0, q, steps, float(batch)))

        def train() -> None:
            train_heads(recipe, TrainData(X, y, n_models=M), 10, torch.Generator().manual_seed(2))

        def train_torch_noise() -> None:
            noise.linear_dp_kernel = lambda: None
            try:
                train()
            finally:
                noise.linear_dp_kernel = real

        a, b, r = _pairs(train, train_torch_noise, pairs)
        lines.append(f"{name:>26} {M:>6} {steps:>5} {a:>9.2f} {b:>8.2f}  "
                     f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="alternating pairs per row (default 5)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if native.linear_dp_kernel() is None:
        raise SystemExit(f"the native library is unavailable: {native.unavailable_reason()}")
    head = [f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), library {native.linear_dp_kernel().path}",
            f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            "each timing: best of 3 calls; arms alternate; ratio = torch time / native time per pair"]
    lines = head + noise_rows(args.pairs) + run_rows(args.pairs)
    lines.append(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
