"""M stacked linear / MLP heads and their per-example gradients, derived by hand.

A head is ``d_in → hidden… → C`` with ReLU between layers (the layout of
:func:`privaudit.defenders.torch_head.build_mlp`). M heads are stored as stacked tensors
``W_l (M, out_l, in_l)``, ``b_l (M, out_l)`` and evaluated with batched matmuls, so one kernel
serves all M models.

Per-example gradients of the cross-entropy (Abadi et al. 2016, DP-SGD) are never materialised:
for a linear layer the gradient of example i is the outer product ``δ_i a_iᵀ`` (plus ``δ_i`` for
the bias), whose Frobenius norm is ``‖δ_i‖·‖a_i‖``; so the per-example norm over all layers is
``Σ_l ‖δ_{l,i}‖² (‖a_{l−1,i}‖² + 1)`` and the clipped sum is ``(s ⊙ δ_l)ᵀ a_{l−1}`` with per-example
scale ``s_i`` (the "ghost clipping" identity). :func:`per_example_gradients` materialises them
anyway for the equivalence test against opacus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class StackedHeads:
    """Parameters of M heads.

    Attributes:
        weights: per layer, (M, out_l, in_l).
        biases: per layer, (M, out_l).
    """

    weights: list[torch.Tensor]
    biases: list[torch.Tensor]

    @property
    def n_models(self) -> int:
        return int(self.weights[0].shape[0])

    def flat(self) -> torch.Tensor:
        """(M, P) all parameters per model, in the order W_1, b_1, W_2, b_2, …."""
        parts = []
        for w, b in zip(self.weights, self.biases):
            parts += [w.reshape(w.shape[0], -1), b]
        return torch.cat(parts, dim=1)

    def n_params(self) -> int:
        return int(sum(w[0].numel() + b[0].numel() for w, b in zip(self.weights, self.biases)))

    def state_dict(self, m: int) -> dict[str, torch.Tensor]:
        """Model ``m`` as an ``nn.Sequential`` state dict of :func:`build_mlp` (keys ``0.weight``…)."""
        out = {}
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            out[f"{2 * i}.weight"] = w[m].detach().clone()
            out[f"{2 * i}.bias"] = b[m].detach().clone()
        return out

    def select(self, idx: torch.Tensor | slice) -> "StackedHeads":
        return StackedHeads([w[idx] for w in self.weights], [b[idx] for b in self.biases])


def layer_sizes(d_in: int, hidden: tuple[int, ...], n_classes: int) -> list[tuple[int, int]]:
    """(in, out) per linear layer."""
    widths = [d_in, *hidden, n_classes]
    return list(zip(widths[:-1], widths[1:]))


def init_heads(
    n_models: int, d_in: int, hidden: tuple[int, ...], n_classes: int,
    generator: torch.Generator | None, device: torch.device | str, shared_seed: int | None = None,
) -> StackedHeads:
    """PyTorch's default ``nn.Linear`` initialisation, U(−1/√fan_in, 1/√fan_in), for M heads.

    With ``shared_seed`` every head gets the initialisation :func:`build_mlp` draws from
    ``torch.Generator().manual_seed(shared_seed)`` (bit-identical to the sequential defender);
    otherwise each head is drawn independently from ``generator``.
    """
    weights, biases = [], []
    if shared_seed is not None:
        g = torch.Generator().manual_seed(int(shared_seed))
        for fan_in, fan_out in layer_sizes(d_in, hidden, n_classes):
            bound = 1.0 / fan_in**0.5
            w = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=g)
            b = torch.empty(fan_out).uniform_(-bound, bound, generator=g)
            weights.append(w.to(device).expand(n_models, -1, -1).contiguous())
            biases.append(b.to(device).expand(n_models, -1).contiguous())
        return StackedHeads(weights, biases)
    for fan_in, fan_out in layer_sizes(d_in, hidden, n_classes):
        bound = 1.0 / fan_in**0.5
        w = torch.empty(n_models, fan_out, fan_in, device=device).uniform_(-bound, bound, generator=generator)
        b = torch.empty(n_models, fan_out, device=device).uniform_(-bound, bound, generator=generator)
        weights.append(w)
        biases.append(b)
    return StackedHeads(weights, biases)


def forward(heads: StackedHeads, X: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Logits (M, b, C) of every head on its own rows ``X`` (M, b, d) or shared rows (b, d).

    Also returns the layer inputs ``a_0..a_{L−1}`` and pre-activations ``z_1..z_L`` for the
    backward pass.
    """
    a = X if X.dim() == 3 else X.unsqueeze(0).expand(heads.n_models, -1, -1)
    inputs, pre = [], []
    last = len(heads.weights) - 1
    for i, (w, b) in enumerate(zip(heads.weights, heads.biases)):
        inputs.append(a)
        z = torch.baddbmm(b.unsqueeze(1), a, w.transpose(1, 2))
        pre.append(z)
        a = torch.relu(z) if i < last else z
    return a, inputs, pre


def output_deltas(
    heads: StackedHeads, logits: torch.Tensor, y: torch.Tensor, inputs: list[torch.Tensor], pre: list[torch.Tensor]
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Per-example ∂loss_i/∂z_l (M, b, out_l) for every layer and the per-example gradient norms (M, b).

    ``loss_i`` is the cross-entropy of example i alone (not divided by the batch size).
    """
    delta = torch.softmax(logits, dim=2)
    delta.scatter_add_(2, y.unsqueeze(2), -torch.ones_like(y, dtype=delta.dtype).unsqueeze(2))
    deltas = [delta]
    for l in range(len(heads.weights) - 1, 0, -1):
        delta = torch.bmm(delta, heads.weights[l]) * (pre[l - 1] > 0)
        deltas.append(delta)
    deltas.reverse()
    sq = torch.zeros(logits.shape[:2], dtype=logits.dtype, device=logits.device)
    for d, a in zip(deltas, inputs):
        sq += d.square().sum(2) * (a.square().sum(2) + 1.0)
    return deltas, sq.sqrt()


def weighted_gradient(deltas: list[torch.Tensor], inputs: list[torch.Tensor], scale: torch.Tensor) -> StackedHeads:
    """Σ_i scale_i · ∇loss_i for every head: weights (M, out, in), biases (M, out). ``scale`` (M, b)."""
    gw, gb = [], []
    for d, a in zip(deltas, inputs):
        ds = d * scale.unsqueeze(2)
        gw.append(torch.bmm(ds.transpose(1, 2), a))
        gb.append(ds.sum(1))
    return StackedHeads(gw, gb)


def per_example_gradients(heads: StackedHeads, X: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """Materialised per-example gradients, per parameter (W_1, b_1, …): (M, b, *shape). For tests."""
    logits, inputs, pre = forward(heads, X)
    yy = y if y.dim() == 2 else y.unsqueeze(0).expand(heads.n_models, -1)
    deltas, _ = output_deltas(heads, logits, yy, inputs, pre)
    out = []
    for d, a in zip(deltas, inputs):
        out += [torch.einsum("mbo,mbi->mboi", d, a), d]
    return out


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """opacus's per-example clip factor ``min(1, C / (‖g_i‖ + 1e-6))``."""
    return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)


def cross_entropy_per_model(heads: StackedHeads, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy (M, b) on rows X (M, b, d) or shared (b, d); labels (M, b) or (b,)."""
    logits, _, _ = forward(heads, X)
    yy = y if y.dim() == 2 else y.unsqueeze(0).expand(heads.n_models, -1)
    return -torch.log_softmax(logits, dim=2).gather(2, yy.unsqueeze(2)).squeeze(2)


def predict_proba(heads: StackedHeads, X: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Softmax probabilities (M, b, C) in float64, computed in row chunks."""
    parts = []
    n = X.shape[-2]
    for s in range(0, n, chunk):
        xs = X[..., s:s + chunk, :]
        logits, _, _ = forward(heads, xs)
        parts.append(torch.softmax(logits.double(), dim=2))
    return torch.cat(parts, dim=1)


def chunk_gradient(
    weights: list[torch.Tensor], biases: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
    scale_of_norms: Callable[[torch.Tensor | None], torch.Tensor], need_norms: bool, xsq: torch.Tensor | None = None,
    one_hot_by_mask: bool = False,
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """``Σ_i s_i ∇loss_i`` of a chunk of Mc heads, computed "feature-major" (activations (Mc, width, b)).

    ``X`` is either every head's own rows (Mc, b, d) or rows shared by the whole chunk (b, d); in
    the shared case the first layer is one GEMM ``(Mc·out, d)·(d, b)`` for all heads of the chunk
    and its weight gradient one GEMM ``(Mc·out, b)·(b, d)``. ``y`` is (Mc, b) (or (b,) shared).
    ``scale_of_norms(norms)`` returns the per-example weights s (Mc, b) from the per-example
    gradient norms (Mc, b) (``None`` when ``need_norms`` is False). ``xsq``: ‖x_i‖² of the rows
    ((Mc, b) or (b,)), precomputed once per row for the ghost-norm identity. ``one_hot_by_mask``:
    subtract the one-hot labels as a comparison mask instead of a ``scatter_add_`` of −1 (the same bits:
    p + (−1) = p − 1 and p − 0 = p for p ≥ 0; no scatter, whose deterministic CUDA kernel is not
    known to be capturable in a CUDA graph).
    Returns the weight gradients (Mc, out, in), bias gradients (Mc, out) and s.
    """
    Mc = weights[0].shape[0]
    shared = X.dim() == 2
    last = len(weights) - 1
    acts: list[torch.Tensor] = []  # inputs of layers 1.. as (Mc, in, b)
    pre: list[torch.Tensor] = []
    a = None
    for i, (w, b) in enumerate(zip(weights, biases)):
        if i == 0:
            if shared:
                z = torch.mm(w.reshape(-1, w.shape[2]), X.t()).view(Mc, w.shape[1], -1)
            else:
                z = torch.bmm(w, X.transpose(1, 2))
        else:
            z = torch.bmm(w, a)
        z += b.unsqueeze(2)
        pre.append(z)
        if i < last:
            a = torch.relu(z)
            acts.append(a)
    delta = torch.softmax(pre[-1], dim=1)
    yy = y.expand(Mc, -1) if y.dim() == 1 else y
    if one_hot_by_mask:
        classes = torch.arange(delta.shape[1], device=delta.device).view(1, -1, 1)
        delta -= (yy.unsqueeze(1) == classes).to(delta.dtype)
    else:
        delta.scatter_add_(1, yy.unsqueeze(1), delta.new_full((1, 1, 1), -1.0).expand(Mc, 1, yy.shape[1]))
    deltas = [delta]
    for l in range(last, 0, -1):
        delta = torch.bmm(weights[l].transpose(1, 2), delta) * (pre[l - 1] > 0)
        deltas.append(delta)
    deltas.reverse()
    norms = None
    if need_norms:
        if xsq is None:
            xsq = X.square().sum(-1)
        sq = deltas[0].square().sum(1) * (xsq + 1.0)  # = 0 + that, bit for bit: a sum of squares is never −0
        for d, a in zip(deltas[1:], acts):
            sq += d.square().sum(1) * (a.square().sum(1) + 1.0)
        norms = sq.sqrt()
    s = scale_of_norms(norms)
    gw, gb = [], []
    for i, d in enumerate(deltas):
        ds = d * s.unsqueeze(1)
        if i == 0:
            if shared:
                gw.append(torch.mm(ds.reshape(-1, ds.shape[2]), X).view(Mc, ds.shape[1], -1))
            else:
                gw.append(torch.bmm(ds, X))
        else:
            gw.append(torch.bmm(ds, acts[i - 1].transpose(1, 2)))
        gb.append(ds.sum(2))
    return gw, gb, s
