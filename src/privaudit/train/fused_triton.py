"""The DP-SGD clipped sum of M linear heads as one Triton kernel: a GPU twin of ``linear_dp.c``.

Why: the static step (:mod:`privaudit.train.static_steps`) gathers every model's padded batch into an
(M, G, d) buffer and reads it twice more for two batched GEMMs — for 1000 heads on 50 000 × 512 at
G = 120 about 1 GB of memory traffic per step, which bounds a CUDA-graph step at ~0.3 ms (~5 s for
15 620 steps). This kernel reads each sampled row once, straight from the feature matrix: one program
per model loads its W (C × d, in registers), and per block of 16 batch rows computes the logits
(``tl.dot`` in IEEE fp32, no TF32), softmax, δ = softmax − onehot, the per-example gradient norm by
the ghost identity ‖δ‖·√(‖x‖² + 1) (Goodfellow 2015; Li et al. 2022, Sec. 4), opacus's clip factor
``min(1, C/(‖g‖ + 1e−6))`` times the slot's weight / expected batch size (Abadi et al. 2016,
Algorithm 1), and accumulates ``sᵀ X`` into the model's gradient in registers. Rows past a model's
batch are never read (the loop stops at its batch size).

Opt-in (``train_heads(formulation="triton")``): it runs inside the CUDA graphs of the static steps;
``auto`` does not use it yet — its numbers differ from the torch path's in the last bits (another
summation order) and it has run on a GPU only where ``benchmarks/gpu_check.sh`` says so. The CPU tests
run it under Triton's interpreter (``TRITON_INTERPRET=1``) where triton is installed.

Limits: linear heads (one layer), float32, d ≤ 1024 and classes ≤ 64 with (classes rounded up to a
power of two ≥ 16) × (d rounded up to a power of two) ≤ 16 384 (W and the gradient stay in registers);
:func:`fits` says whether a shape qualifies.
"""

from __future__ import annotations

import torch

__all__ = ["available", "fits", "linear_clipped_sum", "noise_and_update"]

_ROWS = 16  # batch rows per block (tl.dot needs ≥ 16)
_MAX_TILE = 16_384


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def available() -> str | None:
    """None when triton can be imported; otherwise why not."""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as exc:  # noqa: BLE001 — any import failure means "not here"
        return f"triton cannot be imported ({type(exc).__name__}: {exc})"
    return None


def fits(d: int, classes: int) -> bool:
    """Whether W (classes × d) and the gradient fit the kernel's register tiles."""
    cp, dp = max(16, _pow2(classes)), _pow2(d)
    return d <= 1024 and classes <= 64 and cp * dp <= _MAX_TILE


_KERNEL = None
_UPDATE = None
_UPDATE_BLOCK = 1024


def _update_kernel():  # noqa: ANN202
    global _UPDATE
    if _UPDATE is not None:
        return _UPDATE
    import triton
    import triton.language as tl

    @triton.jit
    def noise_update(FLAT, G, NOISE, numel, scale, lr, B: tl.constexpr):
        i = tl.program_id(0).to(tl.int64) * B + tl.arange(0, B)
        mask = i < numel
        z = tl.load(NOISE + i, mask=mask, other=0.0)
        g = tl.load(G + i, mask=mask, other=0.0)
        w = tl.load(FLAT + i, mask=mask, other=0.0)
        tl.store(FLAT + i, w - (g + z * scale) * lr, mask=mask)

    _UPDATE = noise_update
    return _UPDATE


def noise_and_update(flat: torch.Tensor, g: torch.Tensor, noise: torch.Tensor, scale: float, lr: float) -> None:
    """``flat -= (g + noise·scale)·lr`` in one pass over the three (M, P) buffers, each operation rounded
    to float32 in that order and never fused into an FMA (``enable_fp_fusion=False``): the bits of
    ``noise.mul_(scale); g += noise; flat.sub_(g.mul_(lr))``, with 80 instead of 200 bytes moved per
    parameter (``g`` and ``noise`` are left as they were)."""
    import triton

    numel = flat.numel()
    _update_kernel()[(triton.cdiv(numel, _UPDATE_BLOCK),)](flat, g, noise, numel, float(scale), float(lr),
                                                          B=_UPDATE_BLOCK, enable_fp_fusion=False)


def _kernel():  # noqa: ANN202 — the jitted kernel, built on first use (triton imported lazily)
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def clipped_sum(X, Y, XSQ, IDX, CNT, PARAMS, OUT, G, P, clip, ebs,
                    D: tl.constexpr, NC: tl.constexpr, BD: tl.constexpr, CP: tl.constexpr, BR: tl.constexpr):
        m = tl.program_id(0).to(tl.int64)
        cc = tl.arange(0, CP)
        kk = tl.arange(0, BD)
        cmask = cc < NC
        kmask = kk < D
        base = PARAMS + m * P
        # W^T (BD, CP): W is (NC, D) row-major at the start of the model's parameters
        wt = tl.load(base + cc[None, :] * D + kk[:, None], mask=cmask[None, :] & kmask[:, None], other=0.0)
        bias = tl.load(base + NC * D + cc, mask=cmask, other=0.0)
        gacc = tl.zeros((CP, BD), dtype=tl.float32)
        gb = tl.zeros((CP,), dtype=tl.float32)
        cnt = tl.load(CNT + m).to(tl.int32)
        for r0 in range(0, cnt, BR):
            rr = r0 + tl.arange(0, BR)
            rmask = rr < cnt
            ridx = tl.load(IDX + m * G + rr, mask=rmask, other=0)
            xb = tl.load(X + ridx[:, None] * D + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
            z = tl.dot(xb, wt, input_precision="ieee") + bias[None, :]
            z = tl.where(cmask[None, :], z, float("-inf"))
            e = tl.exp(z - tl.max(z, axis=1)[:, None])
            e = tl.where(cmask[None, :], e, 0.0)
            p = e / tl.sum(e, axis=1)[:, None]
            yv = tl.load(Y + ridx, mask=rmask, other=0)
            delta = p - (cc[None, :] == yv[:, None]).to(tl.float32)
            xsq = tl.load(XSQ + ridx, mask=rmask, other=0.0)
            norm = tl.sqrt(tl.sum(delta * delta, axis=1) * (xsq + 1.0))
            f = tl.minimum(clip / (norm + 1e-6), 1.0) / ebs
            f = tl.where(rmask, f, 0.0)
            s = delta * f[:, None]
            gacc += tl.dot(tl.trans(s), xb, input_precision="ieee")
            gb += tl.sum(s, axis=0)
        out = OUT + m * P
        tl.store(out + cc[:, None] * D + kk[None, :], gacc, mask=cmask[:, None] & kmask[None, :])
        tl.store(out + NC * D + cc, gb, mask=cmask)

    _KERNEL = clipped_sum
    return _KERNEL


def linear_clipped_sum(X: torch.Tensor, y: torch.Tensor, xsq: torch.Tensor, idx: torch.Tensor, counts: torch.Tensor,
                       params: torch.Tensor, out: torch.Tensor, max_grad_norm: float, expected_batch_size: float) -> None:
    """Write every model's clipped, ``1/expected_batch_size``-scaled gradient sum into ``out`` (M, P).

    ``X`` (n, d) float32, ``y`` (n,) int64, ``xsq`` (n,) ‖x‖²; ``idx`` (M, G) int64 rows of each model's
    batch, the first ``counts[m]`` real (a prefix; the rest never read); ``params`` / ``out`` (M, P)
    float32 in :meth:`StackedHeads.flat` order with one linear layer (P = C·d + C). No host sync: it
    can be captured in a CUDA graph.
    """
    M, G = idx.shape
    n, d = X.shape
    P = params.shape[1]
    C = P // (d + 1)
    if P != C * d + C or not fits(d, C):
        raise ValueError(f"fused Triton kernel: d={d}, classes={C} (P={P}) do not fit; see privaudit.train.fused_triton")
    cp, bd = max(16, _pow2(C)), _pow2(d)
    _kernel()[(M,)](X, y, xsq, idx, counts, params, out, G, P, float(max_grad_norm), float(expected_batch_size),
                    D=d, NC=C, BD=bd, CP=cp, BR=_ROWS, num_warps=8 if cp * bd > 4096 else 4)
