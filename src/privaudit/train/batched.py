"""Train M independent heads at once: minibatch SGD or DP-SGD, each model on its own data set.

Each model m trains on the shared base rows (``X_base``, never copied per model) that its
``include[m]`` mask keeps, plus its own extra rows (canaries, ``X_extra[m]``) and its own
gradient canaries (LiDP App. D.2: a virtual example whose gradient is the fixed vector c).

* **SGD** (``dp is None``; :class:`privaudit.defenders.torch_head.TorchMLPDefender`): every epoch a
  fresh random order of the model's own rows (data order with ``shuffle=False``), batches of
  ``batch_size``, mean loss over the batch, SGD with momentum and weight decay as
  ``torch.optim.SGD``.
* **DP-SGD** (Abadi et al. 2016; :class:`privaudit.defenders.dp_sgd.DpSgdDefender`, opacus
  semantics): every step a Poisson batch (each row of the model independently with probability
  q), per-example clipping to C with opacus's factor ``min(1, C/(‖g‖+1e−6))``, the sum plus
  ``N(0, σ²C²I)`` divided by the expected batch size, plain SGD. σ, q and the number of steps come
  from the recipe (:func:`privaudit.train.recipe_from_spec`; opacus's accountant).

All randomness of one call (initialisation, orders / Poisson masks, noise) comes from one
``torch.Generator``; the caller seeds it per block of models (see
:mod:`privaudit.canaries.shards`), so results do not depend on how blocks are grouped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from privaudit.train.heads import (
    StackedHeads,
    clip_factors,
    forward,
    init_heads,
    output_deltas,
    weighted_gradient,
)


@dataclass(frozen=True)
class DPSettings:
    """DP-SGD knobs: noise multiplier σ, clipping norm C, Poisson rate q, steps, expected batch size."""

    noise_multiplier: float
    max_grad_norm: float
    sample_rate: float
    steps: int
    expected_batch_size: float


@dataclass(frozen=True)
class HeadRecipe:
    """A linear (``hidden=()``) or MLP head and how it is trained (SGD or DP-SGD)."""

    hidden: tuple[int, ...]
    epochs: int
    batch_size: int
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    shuffle: bool = True
    shared_init_seed: int | None = None
    dp: DPSettings | None = None


@dataclass
class TrainData:
    """The M data sets of one call.

    Attributes:
        X_base: (n, d) float32 rows shared by all models; y_base: (n,) int64.
        include: (M, n) bool, which base rows model m trains on (None: all).
        X_extra: (M, E, d) per-model extra rows (canaries); y_extra (M, E); extra_valid (M, E) bool.
        grad_canaries: (M, G, P) per-model canary gradients (flattened parameter order of
            :meth:`StackedHeads.flat`); grad_valid (M, G) bool.
        order_key: optional (M, n + E + G) or shared (n + E + G,) sort keys of the virtual rows,
            compared as float32 (exact for integers below 2**24). Used only by SGD with
            ``recipe.shuffle`` False: each epoch model m visits its valid rows in increasing key
            order (ties in row position) instead of in row-position order. This lets a model train
            on an arbitrary ordered list of base rows, e.g. a mock defender whose candidate takes
            the hidden sample's slot in the public training order (Pedersen et al. 2022,
            Theorem 3). None (default): row-position order, unchanged.
    """

    X_base: torch.Tensor
    y_base: torch.Tensor
    n_models: int
    include: torch.Tensor | None = None
    X_extra: torch.Tensor | None = None
    y_extra: torch.Tensor | None = None
    extra_valid: torch.Tensor | None = None
    grad_canaries: torch.Tensor | None = None
    grad_valid: torch.Tensor | None = None
    order_key: torch.Tensor | None = None
    _valid: torch.Tensor | None = field(default=None, repr=False)

    @property
    def n_base(self) -> int:
        return int(self.X_base.shape[0])

    @property
    def n_extra(self) -> int:
        return 0 if self.X_extra is None else int(self.X_extra.shape[1])

    @property
    def n_grad(self) -> int:
        return 0 if self.grad_canaries is None else int(self.grad_canaries.shape[1])

    def valid_rows(self) -> torch.Tensor:
        """(M, n + E + G) bool: which virtual rows belong to each model's data set."""
        if self._valid is None:
            dev, M = self.X_base.device, self.n_models
            parts = [self.include if self.include is not None
                     else torch.ones(M, self.n_base, dtype=torch.bool, device=dev)]
            if self.n_extra:
                parts.append(self.extra_valid if self.extra_valid is not None
                             else torch.ones(M, self.n_extra, dtype=torch.bool, device=dev))
            if self.n_grad:
                parts.append(self.grad_valid if self.grad_valid is not None
                             else torch.ones(M, self.n_grad, dtype=torch.bool, device=dev))
            self._valid = torch.cat(parts, dim=1)
        return self._valid

    def gather(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows (M, b, d), labels (M, b) and an is-gradient-canary mask (M, b) for virtual indices."""
        n, E = self.n_base, self.n_extra
        X = self.X_base[idx.clamp(max=n - 1)]
        y = self.y_base[idx.clamp(max=n - 1)]
        if E:
            mi, bi = ((idx >= n) & (idx < n + E)).nonzero(as_tuple=True)
            if len(mi):
                e = idx[mi, bi] - n
                X[mi, bi] = self.X_extra[mi, e]
                y[mi, bi] = self.y_extra[mi, e]
        return X, y, idx >= n + E


def _unflatten(flat: torch.Tensor, like: StackedHeads) -> StackedHeads:
    ws, bs, pos = [], [], 0
    for w, b in zip(like.weights, like.biases):
        k = w[0].numel()
        ws.append(flat[:, pos:pos + k].reshape(w.shape))
        pos += k
        bs.append(flat[:, pos:pos + b.shape[1]])
        pos += b.shape[1]
    return StackedHeads(ws, bs)


class _Optimizer:
    """``torch.optim.SGD`` (momentum, weight decay) for stacked heads; inactive models are skipped."""

    def __init__(self, heads: StackedHeads, lr: float, momentum: float, weight_decay: float) -> None:
        self.heads, self.lr, self.momentum, self.wd = heads, lr, momentum, weight_decay
        self.buf: list[torch.Tensor] | None = None

    def step(self, grad: StackedHeads, active: torch.Tensor | None) -> None:
        params = self.heads.weights + self.heads.biases
        grads = grad.weights + grad.biases
        if self.wd:
            grads = [g + self.wd * p for g, p in zip(grads, params)]
        if self.momentum:
            if self.buf is None:
                self.buf = [g.clone() for g in grads]
            else:
                for bf, g in zip(self.buf, grads):
                    new = bf * self.momentum + g
                    bf.copy_(new if active is None else torch.where(_bcast(active, new), new, bf))
            grads = self.buf
        for p, g in zip(params, grads):
            upd = g * self.lr
            if active is not None:
                upd = upd * _bcast(active, upd)
            p.sub_(upd)


def _bcast(active: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return active.reshape(-1, *([1] * (like.dim() - 1))).to(like.dtype)


def _grad_canary_term(data: TrainData, idx: torch.Tensor, take: torch.Tensor, like: StackedHeads,
                      scale: torch.Tensor) -> StackedHeads | None:
    """Σ over the selected gradient canaries of ``scale · c`` (scale (M, 1)) as stacked parameters."""
    if not data.n_grad:
        return None
    pos = (idx - data.n_base - data.n_extra).clamp(0, data.n_grad - 1)
    sel = torch.zeros(data.n_models, data.n_grad, dtype=like.weights[0].dtype, device=idx.device)
    sel.scatter_add_(1, pos, take.to(sel.dtype))
    flat = torch.bmm((sel * scale).unsqueeze(1), data.grad_canaries).squeeze(1)
    return _unflatten(flat, like)


def _add(a: StackedHeads, b: StackedHeads | None) -> StackedHeads:
    if b is None:
        return a
    return StackedHeads([x + y for x, y in zip(a.weights, b.weights)], [x + y for x, y in zip(a.biases, b.biases)])


def initial_heads(recipe: HeadRecipe, data: TrainData, n_classes: int, generator: torch.Generator) -> StackedHeads:
    """θ_0 of every model, drawn from ``generator`` exactly as :func:`train_heads` draws it."""
    return init_heads(data.n_models, int(data.X_base.shape[1]), recipe.hidden, n_classes, generator,
                      data.X_base.device, recipe.shared_init_seed)


def train_heads(
    recipe: HeadRecipe, data: TrainData, n_classes: int, generator: torch.Generator,
    init: StackedHeads | None = None,
) -> StackedHeads:
    """Train ``data.n_models`` heads; returns their final parameters (on the data's device).

    Shapes: see :class:`TrainData`. The device is that of ``data.X_base``. ``init`` (from
    :func:`initial_heads` with the same generator, which it advances) is copied, not modified;
    without it the initialisation is drawn here — the same numbers either way.
    """
    if init is None:
        heads = initial_heads(recipe, data, n_classes, generator)
    else:
        heads = StackedHeads([w.clone() for w in init.weights], [b.clone() for b in init.biases])
    opt = _Optimizer(heads, recipe.lr, recipe.momentum if recipe.dp is None else 0.0,
                     recipe.weight_decay if recipe.dp is None else 0.0)
    valid = data.valid_rows()
    with torch.no_grad():
        if recipe.dp is None:
            _train_sgd(recipe, data, heads, opt, valid, generator)
        else:
            _train_dp(recipe.dp, data, heads, opt, valid, generator)
    return heads


def _train_sgd(recipe: HeadRecipe, data: TrainData, heads: StackedHeads, opt: _Optimizer,
               valid: torch.Tensor, gen: torch.Generator) -> None:
    M, N = valid.shape
    dev = valid.device
    if data.order_key is not None and tuple(data.order_key.shape) not in ((M, N), (N,)):
        raise ValueError(f"TrainData.order_key has shape {tuple(data.order_key.shape)}, "
                         f"expected ({M}, {N}) or ({N},)")
    counts = valid.sum(1)
    n_max = int(counts.max())
    pos = torch.arange(N, device=dev)
    bs = recipe.batch_size
    for _ in range(recipe.epochs):
        if recipe.shuffle:
            keys = torch.rand(M, N, device=dev, generator=gen)
        elif data.order_key is not None:
            keys = data.order_key.to(device=dev, dtype=torch.float32).expand(M, N)
        else:
            keys = pos.to(torch.float32).expand(M, N).clone()
        keys = keys.masked_fill(~valid, float("inf"))
        order = torch.argsort(keys, dim=1, stable=True)
        for s in range(0, n_max, bs):
            idx = order[:, s:s + bs]
            in_batch = (s + torch.arange(idx.shape[1], device=dev)).unsqueeze(0) < counts.unsqueeze(1)
            b_m = in_batch.sum(1)
            active = b_m > 0
            w = in_batch.to(torch.float32) / b_m.clamp(min=1).unsqueeze(1).to(torch.float32)
            X, y, is_grad = data.gather(idx)
            logits, inputs, pre = forward(heads, X)
            deltas, _ = output_deltas(heads, logits, y, inputs, pre)
            g = weighted_gradient(deltas, inputs, w * ~is_grad)
            g = _add(g, _grad_canary_term(data, idx, in_batch & is_grad, heads, w.max(1).values.unsqueeze(1)))
            opt.step(g, None if bool(active.all()) else active)


def _train_dp(dp: DPSettings, data: TrainData, heads: StackedHeads, opt: _Optimizer,
              valid: torch.Tensor, gen: torch.Generator) -> None:
    M, N = valid.shape
    dev = valid.device
    C, ebs = dp.max_grad_norm, dp.expected_batch_size
    std = dp.noise_multiplier * C
    if data.n_grad:
        gnorm = data.grad_canaries.norm(dim=2)
        gclip = clip_factors(gnorm, C)  # (M, G)
    for _ in range(dp.steps):
        mask = (torch.rand(M, N, device=dev, generator=gen) < dp.sample_rate) & valid
        b_max = int(mask.sum(1).max())
        g: StackedHeads | None = None
        if b_max > 0:
            idx = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :b_max]
            take = torch.gather(mask, 1, idx)
            X, y, is_grad = data.gather(idx)
            logits, inputs, pre = forward(heads, X)
            deltas, norms = output_deltas(heads, logits, y, inputs, pre)
            scale = clip_factors(norms, C) * (take & ~is_grad) / ebs
            g = weighted_gradient(deltas, inputs, scale)
            if data.n_grad:
                pos = (idx - data.n_base - data.n_extra).clamp(0, data.n_grad - 1)
                sel = torch.zeros(M, data.n_grad, device=dev, dtype=torch.float32)
                sel.scatter_add_(1, pos, (take & is_grad).to(torch.float32))
                flat = torch.bmm((sel * gclip / ebs).unsqueeze(1), data.grad_canaries).squeeze(1)
                g = _add(g, _unflatten(flat, heads))
        noise = torch.randn(M, heads.n_params(), device=dev, generator=gen) * (std / ebs)
        g = _unflatten(noise, heads) if g is None else _add(g, _unflatten(noise, heads))
        opt.step(g, None)
