"""White-box observations of M DP-SGD heads trained together, without a per-model Python loop.

The white-box audit (:mod:`privaudit.audits.whitebox`, after Nasr et al. 2023 "Tight auditing of
differentially private machine learning", white-box threat model with gradient canaries) observes
one opacus run per training: per step the batch size ``B_t``, the clipped canary's effect
``Δ_t = ‖S(data + canary) − S(data)‖`` and the noise ``N_t`` (summarised as ``‖N_t‖²``, ``Σ N_tj⁴``,
``cos(N_{t−1}, N_t)`` and ``Σ_t N_tj²``; :class:`privaudit.stats.observations.RunObservations`).

:class:`HeadsObserver` does the same for every model of one :func:`privaudit.train.train_heads`
call: each step it inserts a fresh random-direction gradient canary ``canary_scale · C · u`` into
every model's clipped sum (drawn from the observer's own generator, so the training draws are
those of an unobserved run), records the Poisson batch sizes and the noise the trainer added —
all as (M,)- or (M, P)-tensor operations on the training device — and returns one
``RunObservations`` per model. Nothing crosses to the host before :meth:`HeadsObserver.runs`: on a
GPU the canaries are drawn by a generator on the GPU (seeded like the CPU one, but CUDA's generator
gives other numbers, as it does for the trainer's own draws) and the float64 summaries stay there.
:func:`privaudit.stats.whitebox.estimate_whitebox` pools them: M models are M audit runs.
"""

from __future__ import annotations

import math

import torch

from privaudit.stats.observations import RunObservations

__all__ = ["HeadsObserver"]


def _row_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Σ_j a_ij b_ij per row, as a batched GEMV (no (M, P) product tensor)."""
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)


class HeadsObserver:
    """Per-step observations of the M heads of one DP-SGD ``train_heads`` call (pass as ``observer=``).

    Args:
        seed: seeds the canary directions (a generator of its own).
        canary_scale: M of the canary ``M·C·u`` (> 1, so that a clipped canary, norm C, differs
            from an unclipped one).
    """

    def __init__(self, *, seed: int, canary_scale: float = 4.0) -> None:
        if not (math.isfinite(canary_scale) and canary_scale > 1.0):
            raise ValueError(f"canary_scale must be a finite number > 1, got {canary_scale!r}")
        self.canary_scale = float(canary_scale)
        self._seed = int(seed)
        self._gen: torch.Generator | None = None  # on the device of the first canaries() call
        self._rows: list[torch.Tensor] = []
        self._sens: list[torch.Tensor] = []
        self._sq: list[torch.Tensor] = []
        self._quart: list[torch.Tensor] = []
        self._cos: list[torch.Tensor] = []
        self._prev: tuple[torch.Tensor, torch.Tensor] | None = None
        self._coord: torch.Tensor | None = None
        self._bufs: list[torch.Tensor] | None = None
        self._draw: tuple[torch.Tensor, torch.Tensor] | None = None
        self.max_grad_norm: float | None = None
        self.noise_multiplier: float | None = None

    def canaries(self, n_models: int, n_params: int, max_grad_norm: float,
                 device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """This step's clipped canaries (M, P) float64 (opacus's clip factor) and their norms Δ_t (M,), on ``device``.

        The canaries live in a buffer of the observer's, valid (and free for the caller to scale in
        place) until the next call: no fresh (M, P) tensors per step. They are drawn by the
        observer's generator, created on ``device`` at the first call (one observer, one device).
        """
        dev = torch.device(device)
        if self._gen is None:
            self._gen = torch.Generator(device=dev).manual_seed(self._seed)
        elif self._gen.device.type != dev.type:
            raise ValueError(f"HeadsObserver drew its canaries on {self._gen.device} and is now asked for {dev}: "
                             "use one observer per device")
        shape = (n_models, n_params)
        if self._draw is None or tuple(self._draw[0].shape) != shape or self._draw[0].device != dev:
            self._draw = (torch.empty(shape, device=dev), torch.empty(shape, dtype=torch.float64, device=dev))
        u32, u = self._draw
        # float32 draws, normalised in float64: a uniformly random direction either way, and torch's
        # float64 normal sampler is ~6x slower here (it was half of an observed MLP step's time).
        torch.randn(shape, generator=self._gen, out=u32)
        u.copy_(u32)
        u *= (self.canary_scale * max_grad_norm) / torch.linalg.vector_norm(u, dim=1, keepdim=True)
        norm = torch.linalg.vector_norm(u, dim=1)
        clipped = u.mul_((max_grad_norm / (norm + 1e-6)).clamp(max=1.0).unsqueeze(1))
        return clipped, torch.linalg.vector_norm(clipped, dim=1)

    def record(self, batch_rows: torch.Tensor, sensitivity: torch.Tensor, noise: torch.Tensor) -> None:
        """One step: Poisson batch sizes (M,), canary effects (M,) and the added noise N_t (M, P).

        Works in float64 on the noise's device, in two (M, P) buffers that alternate between "this
        step" and "previous step", row dot products as batched GEMVs: no fresh (M, P) tensor per step
        (at 1024 × 5130 that was ~15 ms of page faults per tensor on the CPU), and no copy to the host
        (on a GPU, a host copy per step synchronised every step: 0.2 % of peak).
        """
        src = noise.detach()
        if self._bufs is None or self._bufs[0].shape != src.shape or self._bufs[0].device != src.device:
            self._bufs = [torch.empty(tuple(src.shape), dtype=torch.float64, device=src.device) for _ in range(3)]
        n, spare, n2 = self._bufs
        n.copy_(src)
        torch.mul(n, n, out=n2)
        sq = n2.sum(1)
        self._rows.append(batch_rows.detach().to(device=src.device, dtype=torch.int64, copy=True))
        self._sens.append(sensitivity.detach().to(device=src.device, dtype=torch.float64, copy=True))
        self._sq.append(sq)
        self._quart.append(_row_dot(n2, n2))
        if self._prev is None:
            self._cos.append(torch.full_like(sq, math.nan))
        else:
            prev, prev_sq = self._prev
            den = torch.sqrt(sq * prev_sq)
            self._cos.append(torch.where(den > 0, _row_dot(n, prev) / den.clamp(min=1e-300),
                                         torch.full_like(sq, math.nan)).clamp(-1.0, 1.0))
        self._prev = (n, sq)
        self._bufs = [spare, n, n2]  # next step writes into the buffer the step before this one used
        if self._coord is None:
            self._coord = n2.clone()
        else:
            self._coord.add_(n2)

    @property
    def steps(self) -> int:
        return len(self._rows)

    def runs(self, dataset_size: int | None = None) -> list[RunObservations]:
        """One :class:`RunObservations` per model (columns of the per-step tensors)."""
        if not self._rows or self._coord is None:
            raise ValueError("no DP-SGD step was observed (was the observer passed to a DP-SGD train_heads call?)")
        cols = [torch.stack(x, dim=1).cpu().numpy() for x in (self._rows, self._sens, self._sq, self._quart, self._cos)]
        coord = self._coord.cpu().numpy()
        return [RunObservations(batch_rows=cols[0][m], sensitivity=cols[1][m], noise_sq=cols[2][m],
                                noise_quartic=cols[3][m], noise_cos=cols[4][m], coord_sq=coord[m],
                                declared_dataset_size=dataset_size, declared_noise_multiplier=self.noise_multiplier,
                                declared_max_grad_norm=self.max_grad_norm)
                for m in range(coord.shape[0])]
