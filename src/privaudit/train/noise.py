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

__all__ = ["draw_noise", "draw_standard_noise"]

_SEED_HIGH = 2 ** 63 - 1


def draw_noise(out: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
    """Fill ``out`` (M, P) with ``scale`` · N(0, 1) draws from ``gen`` (see the module docstring); returns ``out``."""
    return _fill(out, gen, float(scale))


def draw_standard_noise(out: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Fill ``out`` with the N(0, 1) draws that :func:`draw_noise` scales, from the same draws of ``gen``: a pass
    that multiplies them by ``scale`` in float32 itself (the fused Triton update) gets :func:`draw_noise`'s bits
    (``z · 1.0`` is ``z``; both round ``z · scale`` once)."""
    return _fill(out, gen, None)


def _fill(out: torch.Tensor, gen: torch.Generator, scale: float | None) -> torch.Tensor:
    lib = linear_dp_kernel() if out.device.type == "cpu" and out.dtype == torch.float32 else None
    if lib is None or not out.is_contiguous() or out.dim() != 2:
        z = torch.randn(out.shape, device=out.device, generator=gen, out=out)
        return z if scale is None else z.mul_(scale)
    seed = int(torch.randint(_SEED_HIGH, (), generator=gen))
    lib.gaussian_fill(seed, out, 1.0 if scale is None else scale, torch.get_num_threads())
    return out
