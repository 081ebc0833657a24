"""DP-SGD's Gaussian noise for the M models of one step, drawn where it is cheapest.

On the CPU, with the native library (:mod:`privaudit.train.native`, ``gaussian_noise.c``): one 63-bit
seed drawn from the trainer's generator per step, then each model's row from its own xoshiro256++
stream by the Box-Muller transform, on torch's threads — 3-4× faster than ``torch.randn`` on one core
here and parallel (``benchmarks/results/gaussian_noise_cpu.txt``), the same numbers for any thread
count. Elsewhere (CUDA, or the library turned off or unbuildable): ``torch.randn`` from the generator,
as before. Both are i.i.d. N(0, σ²) per coordinate (Abadi et al. 2016, Algorithm 1, line "Add noise");
their numbers differ, as torch's CPU and CUDA generators' do.
"""

from __future__ import annotations

import torch

from privaudit.train.native import linear_dp_kernel

__all__ = ["draw_noise"]

_SEED_HIGH = 2 ** 63 - 1


def draw_noise(out: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
    """Fill ``out`` (M, P) with ``scale`` · N(0, 1) draws from ``gen`` (see the module docstring); returns ``out``."""
    lib = linear_dp_kernel() if out.device.type == "cpu" and out.dtype == torch.float32 else None
    if lib is None or not out.is_contiguous() or out.dim() != 2:
        return torch.randn(out.shape, device=out.device, generator=gen, out=out).mul_(scale)
    seed = int(torch.randint(_SEED_HIGH, (), generator=gen))
    lib.gaussian_fill(seed, out, float(scale), torch.get_num_threads())
    return out
