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
  q; drawn as geometric gaps, :func:`poisson_rows`), per-example clipping to C with opacus's factor ``min(1, C/(‖g‖+1e−6))``, the sum plus
  ``N(0, σ²C²I)`` divided by the expected batch size, plain SGD. σ, q and the number of steps come
  from the recipe (:func:`privaudit.defenders.recipes.recipe_from_spec`; opacus's accountant).

All randomness of one call (initialisation, orders / Poisson batches, noise) comes from one
``torch.Generator``; the caller seeds it per block of models (see
:mod:`privaudit.canaries.shards`), so results do not depend on how blocks are grouped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from privaudit.train.cuda_graphs import EpochBlocks, captured_or_none
from privaudit.train.heads import StackedHeads, chunk_gradient, clip_factors, init_heads
from privaudit.train.native import LinearDpKernel, linear_dp_kernel, unavailable_reason
from privaudit.train.noise import draw_noise
from privaudit.train.observe import HeadsObserver
from privaudit.train.static_steps import STEPS_PER_GRAPH, StaticDpStep, capture_graph, gap_block, run_static_steps


DEFAULT_MEMORY_BUDGET = 1 << 30
"""Default bound (bytes) on the trainer's working set beyond inputs and parameters."""
_CHUNK_BYTES = 4 << 20
"""Target working set of one compute chunk (rows + activations of its models) on the CPU: cache-sized.
On a GPU there is no cache to fit and every chunk costs its kernel launches, so chunks are bounded
by the memory budget alone (an eighth of it)."""
_SHARED_MIN_FILL = (0.35, 0.9)
"""Shared-rows formulation when ≥ this fraction of the chunk's (model, row) slots are in a batch, for
linear heads and for MLP heads (whose hidden layers are per-model GEMMs over all the shared rows).
Measured on 2 AMD EPYC cores, digits, 256 DP-SGD heads, q ∈ {0.07, 0.2, 0.4, 0.7}: the shared
formulation wins for linear heads from q ≈ 0.4, never for hidden-64 MLPs below q = 0.7."""
_SHARED_MIN_MODELS = 8
"""... and when at least this many models fit in one shared chunk (else nothing is shared)."""


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

    @property
    def n_virtual(self) -> int:
        """Virtual rows per model: base rows, extra rows, gradient canaries."""
        return self.n_base + self.n_extra + self.n_grad

    def all_valid(self) -> bool:
        """Whether every virtual row belongs to every model's data set (no masks given)."""
        return self.include is None and self.extra_valid is None and self.grad_valid is None

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


FORMULATIONS = ("auto", "gather", "shared", "native", "static", "graph", "triton")
"""``train_heads(formulation=...)``; see its docstring."""


def _native_fits(recipe: HeadRecipe, data: TrainData) -> bool:
    """Whether the fused kernel applies: DP-SGD, linear heads, float32 rows on the CPU."""
    return (recipe.dp is not None and not recipe.hidden and data.X_base.device.type == "cpu"
            and data.X_base.dtype == torch.float32)


def _native_kernel(recipe: HeadRecipe, data: TrainData, formulation: str) -> LinearDpKernel | None:
    """The fused kernel where ``formulation`` asks for it (``native``) or allows it (``auto``)."""
    if formulation not in ("auto", "native") or not _native_fits(recipe, data):
        return None
    kernel = linear_dp_kernel()
    if kernel is None and formulation == "native":
        raise ValueError(f"formulation='native': the native kernel is unavailable ({unavailable_reason()})")
    return kernel


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
        params = heads.weights + heads.biases
        # Reused scratch per parameter (weight-decayed gradient; the update): no fresh (M, …) tensors per
        # step. Each in-place step below rounds exactly like the out-of-place expression it replaces.
        self._decayed = [torch.empty_like(p) for p in params] if weight_decay else []
        self._upd = [torch.empty_like(p) for p in params]

    def step(self, grad: StackedHeads, active: torch.Tensor | None) -> None:
        params = self.heads.weights + self.heads.biases
        grads = grad.weights + grad.biases
        if self.wd:  # g + wd·p
            grads = [torch.mul(p, self.wd, out=s).add_(g) for g, p, s in zip(grads, params, self._decayed)]
        if self.momentum:
            if self.buf is None:
                self.buf = [g.clone() for g in grads]
            else:
                for bf, g in zip(self.buf, grads):
                    if active is None:  # bf·momentum + g
                        bf.mul_(self.momentum).add_(g)
                    else:
                        new = bf * self.momentum + g
                        bf.copy_(torch.where(_bcast(active, new).bool(), new, bf))
            grads = self.buf
        for p, g, s in zip(params, grads, self._upd):
            upd = torch.mul(g, self.lr, out=s)
            if active is not None:
                upd.mul_(_bcast(active, upd))
            p.sub_(upd)


def _without_host_reads(device: torch.device) -> bool:
    """Whether a step must not read a value back to the host: on CUDA each read waits for the queue to drain, so a
    step of small kernels cannot overlap the next one's launches (the SGD path read ``active.all()`` every step;
    the H200 lease measured 18.5 s per call of the default MLP at 50k rows, 1.6 ms a step). The masked update then
    runs every step: the same numbers when every model is active (``bf*m + g`` rounds as ``bf.mul_(m).add_(g)``,
    times 1.0 is exact). On a CPU the read is free and the unmasked update cheaper."""
    return device.type == "cuda"


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
    init: StackedHeads | None = None, *, memory_budget: int = DEFAULT_MEMORY_BUDGET,
    formulation: str = "auto", observer: HeadsObserver | None = None,
) -> StackedHeads:
    """Train ``data.n_models`` heads; returns their final parameters (on the data's device).

    Shapes: see :class:`TrainData`. The device is that of ``data.X_base``. ``init`` (from
    :func:`initial_heads` with the same generator, which it advances) is copied, not modified;
    without it the initialisation is drawn here — the same numbers either way.

    Models are processed in chunks (see the module docstring, "Formulation"): ``memory_budget``
    (bytes, default 1 GiB) bounds the trainer's working set beyond the inputs and parameters (the
    per-step random draws are taken in row blocks, per-epoch orders are int32);
    ``formulation`` is ``"auto"`` (DP-SGD on linear heads on the CPU: the fused kernel of
    :mod:`privaudit.train.native` when it is available; otherwise the rule in :func:`_use_shared`),
    ``"gather"`` (always each model's own rows, torch ops), ``"shared"`` (rows shared by a chunk
    wherever the data allow it) or ``"native"`` (the fused kernel, an error where it does not apply
    or cannot be built), ``"static"`` (DP-SGD as fixed-shape steps without host syncs,
    :mod:`privaudit.train.static_steps`) or ``"graph"`` (those steps captured in CUDA graphs: what
    ``"auto"`` does for DP-SGD on CUDA where it applies; for SGD, an epoch's steps captured block by block and
    replayed every epoch, :class:`privaudit.train.cuda_graphs.EpochBlocks`, what ``"auto"`` does on CUDA from
    two epochs) or ``"triton"`` (those steps with the clipped sum of
    linear heads as one Triton kernel, :mod:`privaudit.train.fused_triton`; opt-in, in CUDA graphs on
    CUDA) — all but ``"auto"`` for tests and benchmarks;
    all give the same results up to float rounding.

    ``observer`` (DP-SGD only; :class:`privaudit.train.observe.HeadsObserver`) turns the call into
    white-box audit runs: every step each model's clipped sum gets a fresh gradient canary and the
    observer records batch sizes, canary effects and the noise, as whole-tensor operations.
    """
    if observer is not None and recipe.dp is None:
        raise ValueError("observer needs a DP-SGD recipe (recipe.dp); SGD adds no noise to observe")
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {', '.join(map(repr, FORMULATIONS))}, not {formulation!r}")
    if formulation in ("static", "triton") and (recipe.dp is None or observer is not None):
        raise ValueError(f"formulation={formulation!r} is for DP-SGD without an observer; use 'auto'")
    if formulation == "graph" and observer is not None:
        raise ValueError("formulation='graph' is for DP-SGD without an observer, or SGD; use 'auto'")
    if formulation == "graph" and data.X_base.device.type != "cuda":
        raise ValueError("formulation='graph' captures CUDA graphs and needs the data on a CUDA device; "
                         + ("'static' runs the same fixed-shape steps without graphs on any device" if recipe.dp
                            else "use 'auto' (SGD steps run eagerly off CUDA)"))
    if formulation == "triton":
        from privaudit.train.fused_triton import available, fits

        if (why := available()) is not None:
            raise ValueError(f"formulation='triton': {why}; use 'auto'")
        C = n_classes
        if recipe.hidden or data.X_base.dtype != torch.float32 or not fits(int(data.X_base.shape[1]), C):
            raise ValueError("formulation='triton' is the fused clipped sum of linear heads (hidden=()) on float32 rows "
                             f"with d <= 1024 and <= 64 classes (got hidden={recipe.hidden}, d={data.X_base.shape[1]}, "
                             f"{C} classes); use 'auto'")
    if formulation == "native" and not _native_fits(recipe, data):
        raise ValueError("formulation='native' is the fused kernel for DP-SGD on linear heads (hidden=()) with "
                         "float32 rows on the CPU; use 'auto' for this recipe")
    if init is None:
        heads = initial_heads(recipe, data, n_classes, generator)
    else:
        heads = StackedHeads([w.clone() for w in init.weights], [b.clone() for b in init.biases])
    plan = _Plan(data, heads, memory_budget, formulation)
    with torch.no_grad():
        if recipe.dp is None:
            opt = _Optimizer(heads, recipe.lr, recipe.momentum, recipe.weight_decay)
            _train_sgd(recipe, data, heads, opt, data.valid_rows(), generator, plan)
        else:
            _train_dp(recipe.dp, recipe.lr, data, heads, generator, plan, observer,
                      _native_kernel(recipe, data, formulation))
    return heads


class _Plan:
    """Chunk sizes, per-row constants (‖x_i‖²) and the gather of one chunk's rows."""

    def __init__(self, data: TrainData, heads: StackedHeads, memory_budget: int, formulation: str) -> None:
        self.data, self.formulation = data, formulation
        self.n_models = data.n_models
        self.budget = max(int(memory_budget), 1 << 20)
        self.widths = [w.shape[1] for w in heads.weights]  # out width of each layer
        self.d = int(data.X_base.shape[1])
        self.xsq_base = _row_sq_norms(data.X_base)
        self.xsq_extra = data.X_extra.square().sum(2) if data.n_extra else None
        self._rows_buf: torch.Tensor | None = None

    def rand_rows(self, N: int) -> int:
        """Models per block of ``torch.rand(·, N)`` draws (float + bool mask) within a quarter of the budget."""
        return max(1, (self.budget // 4) // (5 * N))

    def chunk_models(self, rows_per_model: int, shared: bool) -> int:
        """Models per compute chunk: each model's rows and activations within ``_CHUNK_BYTES`` (CPU; an
        eighth of the budget on other devices) — or all models in one chunk when they fit in twice that
        (two chunks would double the per-chunk operations for little cache gain: 256 linear heads on
        digits, 1 chunk 15 % faster than 2)."""
        act = 3 * sum(self.widths) + (0 if shared else self.d)
        cap = self.budget // 8 if self.data.X_base.device.type != "cpu" else min(_CHUNK_BYTES, self.budget // 8)
        per_model = max(1, 4 * rows_per_model * act)
        if self.n_models * per_model <= 2 * cap:
            return self.n_models
        return max(1, cap // per_model)

    def labels(self, idx: torch.Tensor, m0: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Labels, ‖x‖² and is-gradient-canary (None when the data have no gradient canaries), each (Mc, b),
        of models m0.. at virtual rows ``idx`` (Mc, b)."""
        data, n, E = self.data, self.data.n_base, self.data.n_extra
        Mc, b = idx.shape
        flat = self._base_rows(idx)
        y = torch.index_select(data.y_base, 0, flat).view(Mc, b)
        xsq = torch.index_select(self.xsq_base, 0, flat).view(Mc, b)
        if _without_host_reads(idx.device):
            if (dense := self._extra_dense(idx, m0)) is not None:
                mask, models, e = dense
                y = torch.where(mask, data.y_extra[models, e], y)
                xsq = torch.where(mask, self.xsq_extra[models, e], xsq)
        elif (slots := self._extra_slots(idx)) is not None:
            mi, bi, e = slots
            y[mi, bi] = data.y_extra[m0 + mi, e]
            xsq[mi, bi] = self.xsq_extra[m0 + mi, e]
        return y, xsq, (idx >= n + E if data.n_grad else None)

    def rows(self, m0: int, idx: torch.Tensor) -> torch.Tensor:
        """Rows (Mc, b, d) of models m0.. at virtual rows ``idx`` (Mc, b) (gradient canaries: any row).

        Gathered into one buffer kept by the plan and valid until the next call: a cache-sized buffer
        written every chunk, never handed back to the allocator (a fresh tensor per chunk cost page
        faults: ``index_select`` into a new 2-4 MB tensor took 2-4× as long here).
        """
        data = self.data
        Mc, b = idx.shape
        flat = self._base_rows(idx)
        need = Mc * b * self.d
        if self._rows_buf is None or self._rows_buf.numel() < need:
            self._rows_buf = torch.empty(need, dtype=data.X_base.dtype, device=data.X_base.device)
        X = torch.index_select(data.X_base, 0, flat, out=self._rows_buf[:need].view(Mc * b, self.d)).view(Mc, b, self.d)
        if _without_host_reads(idx.device):
            if (dense := self._extra_dense(idx, m0)) is not None:
                mask, models, e = dense
                X = torch.where(mask.unsqueeze(2), data.X_extra[models, e], X)
        elif (slots := self._extra_slots(idx)) is not None:
            mi, bi, e = slots
            X[mi, bi] = data.X_extra[m0 + mi, e]
        return X

    def _base_rows(self, idx: torch.Tensor) -> torch.Tensor:
        """``idx`` flattened; rows past the base rows (extra rows, gradient canaries) mapped to the last base row."""
        n = self.data.n_base
        return (idx if self.data.n_virtual == n else idx.clamp(max=n - 1)).reshape(-1)

    def _extra_dense(self, idx: torch.Tensor, m0: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """Where ``idx`` (Mc, b) points at a per-model extra row (mask), and the (model, extra-row) index of every
        slot (clamped where it does not): the extra rows taken by :func:`torch.where`, with nothing read back to
        the host (:func:`_without_host_reads`; :meth:`_extra_slots` counts the slots). None without extra rows."""
        n, E = self.data.n_base, self.data.n_extra
        if not E:
            return None
        mask = (idx >= n) & (idx < n + E)
        models = torch.arange(m0, m0 + idx.shape[0], device=idx.device).unsqueeze(1).expand_as(idx)
        return mask, models, (idx - n).clamp(0, E - 1)

    def _extra_slots(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The (model, slot, extra-row) indices of ``idx``'s per-model extra rows; None when it has none."""
        n, E = self.data.n_base, self.data.n_extra
        if not E:
            return None
        mi, bi = ((idx >= n) & (idx < n + E)).nonzero(as_tuple=True)
        return (mi, bi, idx[mi, bi] - n) if len(mi) else None


def _row_sq_norms(X: torch.Tensor, block: int = 4096) -> torch.Tensor:
    """‖x_i‖² of every row, ``X.square().sum(1)`` computed in blocks of rows (no (n, d) temporary)."""
    out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
    for r0 in range(0, X.shape[0], block):
        torch.sum(X[r0:r0 + block].square(), 1, out=out[r0:r0 + block])
    return out


def _use_shared(plan: _Plan, examples: float, models: int, rows: int) -> bool:
    """Shared rows (one GEMM over the union of a chunk's rows) or per-model gathered rows?

    The shared formulation computes ``models × rows`` example slots of which ``examples`` are in a
    batch; it pays when that fill beats the measured ratio of the two formulations' FLOP rates on
    this kind of machine (``_SHARED_MIN_FILL``).
    """
    if plan.formulation != "auto":
        return plan.formulation == "shared"
    return examples >= _SHARED_MIN_FILL[len(plan.widths) > 1] * models * rows


def valid_row_table(valid: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Each model's valid virtual rows in increasing order, (M, V_max) int64 (padding: arbitrary), and their
    count (M,); the table is None when every row is valid for every model (then position = row)."""
    counts = valid.sum(1)
    if bool((counts == valid.shape[1]).all()):
        return None, counts
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)
    return order[:, :max(1, int(counts.max()))].contiguous(), counts


def poisson_batches(table: torch.Tensor | None, n_valid: torch.Tensor, q: float,
                    gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Poisson batch per model — each of its ``n_valid[m]`` rows independently with probability ``q``.

    Drawn as geometric gaps between sampled rows (the gaps of a Bernoulli(q) sequence are i.i.d.
    Geometric(q) on {1, 2, …}): about q·n + O(√(q·n)) draws per model and step instead of n uniforms,
    the same distribution as opacus's ``UniformWithReplacementSampler`` mask. Gaps are drawn in
    blocks of G columns for all models until every model's last sampled position lies past its
    data set, so the numbers depend only on the generator, ``q`` and the valid rows.

    Returns:
        ``idx`` (M, b_max): each model's sampled virtual rows in increasing order, padded with row 0;
        ``take`` (M, b_max) bool: which slots are real (a prefix of each row); the batch size per model.
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sample_rate must lie in (0, 1], got {q}")
    M, dev = n_valid.shape[0], n_valid.device
    v_max = int(n_valid.max()) if M else 0
    if v_max == 0:
        return (torch.zeros(M, 0, dtype=torch.long, device=dev), torch.zeros(M, 0, dtype=torch.bool, device=dev),
                torch.zeros(M, dtype=torch.long, device=dev))
    if q == 1.0:  # every valid row (a batch larger than the data set: opacus's q is capped at 1)
        p = torch.arange(v_max, device=dev).expand(M, v_max)
        take = p < n_valid.unsqueeze(1)
        counts = take.sum(1)
    else:
        G = gap_block(q, v_max)
        log_keep = math.log1p(-q)

        def gaps() -> torch.Tensor:  # Geometric(q) on {1, 2, …} by inversion: ⌊log(1 − U) / log(1 − q)⌋ + 1
            u = torch.rand(M, G, dtype=torch.float64, device=dev, generator=gen)
            # Summed as int64: exact, and a floating-point cumsum on CUDA has no deterministic kernel
            # (torch.use_deterministic_algorithms, which base.device: cuda turns on, refuses it).
            return u.neg_().log1p_().div_(log_keep).floor_().add_(1.0).long().cumsum_(1)

        pos = gaps()
        while bool((pos[:, -1] <= n_valid).any()):  # some model's data set goes on past its last draw
            pos = torch.cat([pos, gaps() + pos[:, -1:]], dim=1)
        keep = pos <= n_valid.unsqueeze(1)  # 1-based positions within each model's valid rows
        counts = keep.sum(1)
        b_max = int(counts.max())
        take = keep[:, :b_max]
        p = pos[:, :b_max] - 1
    idx = (p if table is None else table.gather(1, p.clamp(max=table.shape[1] - 1))).masked_fill(~take, 0)
    return idx, take, counts


def poisson_rows(table: torch.Tensor | None, n_valid: torch.Tensor, q: float,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`poisson_batches` as (model index, virtual row) pairs sorted by model then row, and the batch sizes."""
    idx, take, counts = poisson_batches(table, n_valid, q, gen)
    m, k = take.nonzero(as_tuple=True)
    return m, idx[m, k], counts


def _empty_like(heads: StackedHeads) -> StackedHeads:
    return StackedHeads([torch.empty_like(w) for w in heads.weights], [torch.empty_like(b) for b in heads.biases])


def _put(g: StackedHeads, m0: int, gw: list[torch.Tensor], gb: list[torch.Tensor]) -> None:
    for dst, src in zip(g.weights + g.biases, gw + gb):
        dst[m0:m0 + src.shape[0]] = src


def _train_sgd(recipe: HeadRecipe, data: TrainData, heads: StackedHeads, opt: _Optimizer,
               valid: torch.Tensor, gen: torch.Generator, plan: _Plan) -> None:
    M, N = valid.shape
    dev = valid.device
    n, E = data.n_base, data.n_extra
    if data.order_key is not None and tuple(data.order_key.shape) not in ((M, N), (N,)):
        raise ValueError(f"TrainData.order_key has shape {tuple(data.order_key.shape)}, "
                         f"expected ({M}, {N}) or ({N},)")
    counts = valid.sum(1)
    n_max = int(counts.max())
    bs = recipe.batch_size
    # Same rows in the same order for every model: one order, one batch of rows per step for all.
    same_order = (not recipe.shuffle and (data.order_key is None or data.order_key.dim() == 1)
                  and bool((valid == valid[:1]).all()) and not bool(valid[0, n:n + E].any()))
    shared = same_order and plan.formulation != "gather"
    rows = 1 if same_order else M
    if not recipe.shuffle:
        if data.order_key is not None:
            keys = data.order_key.to(device=dev, dtype=torch.float32).expand(M, N)[:rows]
        else:
            keys = torch.arange(N, device=dev).to(torch.float32).expand(rows, N)
        fixed = torch.argsort(keys.masked_fill(~valid[:rows], float("inf")), dim=1, stable=True).to(torch.int32)
    step_rows = plan.rand_rows(N)
    mc = plan.chunk_models(bs, shared)
    g_step = _empty_like(heads)  # the step's gradient, every model's slice written each step
    # the epoch's order, in one buffer every epoch (a captured step reads it at a fixed address)
    order_buf = fixed if not recipe.shuffle else torch.empty(M, N, dtype=torch.int32, device=dev)
    # on CUDA the one-hot labels are subtracted as a mask, not scattered: the same bits, and capturable
    by_mask = _without_host_reads(dev)

    def step(s: int) -> None:
        idx = order_buf[:, s:s + bs].long()
        in_batch = (s + torch.arange(idx.shape[1], device=dev)).unsqueeze(0) < counts.unsqueeze(1)
        b_m = in_batch.sum(1)
        active = b_m > 0
        w = in_batch.to(torch.float32) / b_m.clamp(min=1).unsqueeze(1).to(torch.float32)
        is_grad_all = idx.expand(M, -1) >= n + E
        scale = w * ~is_grad_all
        g = g_step
        for m0 in range(0, M, mc):
            m1 = min(M, m0 + mc)
            sc = scale[m0:m1]
            if shared:
                r = idx[0].clamp(max=n - 1)
                X, y, xsq = data.X_base[r], data.y_base[r], plan.xsq_base[r]
            else:
                chunk_idx = idx.expand(M, -1)[m0:m1]
                y, xsq, _ = plan.labels(chunk_idx, m0)
                X = plan.rows(m0, chunk_idx)
            gw, gb, _ = chunk_gradient([x[m0:m1] for x in heads.weights], [x[m0:m1] for x in heads.biases],
                                       X, y, lambda _norms, sc=sc: sc, False, xsq, one_hot_by_mask=by_mask)
            _put(g, m0, gw, gb)
        g = _add(g, _grad_canary_term(data, idx.expand(M, -1), in_batch & is_grad_all, heads,
                                      w.max(1).values.unsqueeze(1)))
        opt.step(g, active if _without_host_reads(dev) else (None if bool(active.all()) else active))

    starts = range(0, n_max, bs)
    blocks = None
    if _sgd_graphs_fit(plan.formulation, data, recipe.epochs):
        blocks = EpochBlocks(step, starts, lambda: heads.weights + heads.biases + (opt.buf or []),
                             lambda make: captured_or_none(make, plan.formulation, "SGD"))
    for _ in range(recipe.epochs):
        if recipe.shuffle:
            for r0 in range(0, M, step_rows):  # the rows of torch.rand(M, N), drawn block by block
                keys = torch.rand(min(step_rows, M - r0), N, device=dev, generator=gen)
                keys.masked_fill_(~valid[r0:r0 + keys.shape[0]], float("inf"))
                order_buf[r0:r0 + keys.shape[0]] = torch.argsort(keys, dim=1, stable=True)
                del keys
        if blocks is not None:
            blocks.run_epoch()
        else:
            for s in starts:
                step(s)


def _sgd_graphs_fit(formulation: str, data: TrainData, epochs: int) -> bool:
    """Whether SGD epochs run as captured blocks (:class:`privaudit.train.cuda_graphs.EpochBlocks`): on CUDA,
    ``auto`` (from two epochs: a block is captured once and pays from its first replay) or ``graph``; not with
    gradient canaries (their term scatters, not known to be capturable)."""
    if formulation not in ("auto", "graph") or data.X_base.device.type != "cuda":
        return False
    if data.n_grad:
        if formulation == "graph":
            raise ValueError("formulation='graph' for SGD is for data without gradient canaries; use 'auto'")
        return False
    return formulation == "graph" or epochs >= 2


def _train_dp(dp: DPSettings, lr: float, data: TrainData, heads: StackedHeads,
              gen: torch.Generator, plan: _Plan, observer: HeadsObserver | None = None,
              kernel: LinearDpKernel | None = None) -> None:
    """DP-SGD steps on all M models; parameters and the step's gradient live in two flat (M, P) buffers.

    Per step: one Poisson draw of every model's padded batch (:func:`poisson_batches`), labels and
    ‖x‖² gathered once; per chunk only the row gather (into one reused buffer) and the chunk's
    gradient; the canary term, the noise and the plain SGD update (learning rate ``lr``; DP-SGD
    ignores momentum and weight decay) are single (M, P) operations. The
    operations and their order per element are those of per-layer updates, so for the same chunks the
    numbers are too.
    """
    M, N = data.n_models, data.n_virtual
    dev = data.X_base.device
    n = data.n_base
    C, ebs = dp.max_grad_norm, dp.expected_batch_size
    std = dp.noise_multiplier * C
    if observer is not None:
        observer.max_grad_norm, observer.noise_multiplier = float(C), float(dp.noise_multiplier)
    if data.n_grad:
        gnorm = data.grad_canaries.norm(dim=2)
        gclip = clip_factors(gnorm, C)  # (M, G)
    q = dp.sample_rate
    if data.all_valid():  # no (M, N) mask to build: every model's rows are 0..N-1
        table, n_valid = None, torch.full((M,), N, dtype=torch.long, device=dev)
    else:
        table, n_valid = valid_row_table(data.valid_rows())
    mc = plan.chunk_models(max(1, int(q * N * 1.2) + 8), False)
    # Expected fill of a chunk's union of rows, q / (1 − (1 − q)^Mc): the shared formulation is tried
    # only where it can pay (see _use_shared).
    mc_shared = plan.chunk_models(n, True)
    fill = q / max(1e-12, 1.0 - (1.0 - q) ** mc_shared)
    # (the fused kernel reads each model's rows in place: no chunks, nothing shared)
    try_shared = kernel is None and (plan.formulation == "shared" or (
        plan.formulation == "auto" and mc_shared >= _SHARED_MIN_MODELS and _use_shared(plan, fill, 1, 1)))
    if try_shared:
        mc = mc_shared
    if kernel is not None:
        rows = (data.X_base.contiguous(), data.y_base.to(torch.int64).contiguous(), plan.xsq_base.contiguous(),
                *((data.X_extra.contiguous(), data.y_extra.to(torch.int64).contiguous(), plan.xsq_extra.contiguous())
                  if data.n_extra else (None, None, None)))
        threads = torch.get_num_threads()
    flat = heads.flat()  # (M, P) parameters, updated in place
    P = flat.shape[1]
    params = _unflatten(flat, heads)
    g = torch.empty_like(flat)  # the step's gradient
    grad = _unflatten(g, heads)  # per-layer views of g
    noise = torch.empty_like(flat)  # the step's noise, drawn in place (same numbers as a fresh randn)
    # (M, P) scratch: the gradient canaries' term; the observed canary, then N_t
    scratch = torch.empty_like(flat) if observer is not None or data.n_grad else None
    def eager_step() -> None:
        idx, take, counts = poisson_batches(table, n_valid, q, gen)
        if kernel is not None:
            kernel.clipped_sum(*rows, idx, counts, flat, g, C, ebs, threads)
            sel = _grad_selection(data, idx, take)
        else:
            sel = _dp_clipped_sum(data, plan, params, g, grad, idx, take, counts, mc, try_shared, C, ebs)
        if sel is not None and scratch is not None:
            g.add_(torch.bmm((sel * gclip / ebs).unsqueeze(1), data.grad_canaries, out=scratch.unsqueeze(1)).squeeze(1))
        draw_noise(noise, gen, std / ebs)
        if observer is not None and scratch is not None:
            canary, effect = observer.canaries(M, P, C, dev)
            g.add_(scratch.copy_(canary.div_(ebs)))  # float64 / ebs, then rounded to float32, as .to() would
            data_rows = counts if sel is None else counts - sel.sum(1).to(counts.dtype)
            observer.record(data_rows, effect, torch.mul(noise, ebs, out=scratch))
        g.add_(noise)
        flat.sub_(g.mul_(lr))

    static = None
    if kernel is None and observer is None and static_fits(plan.formulation, data, n_valid, dp.steps):
        static = StaticDpStep(data=data, plan=plan, flat=flat, params=params, g=g, grad=grad, noise=noise, table=table,
                              n_valid=n_valid, q=q, max_grad_norm=C, noise_multiplier=dp.noise_multiplier,
                              expected_batch_size=ebs, lr=lr, put=_put, fused=plan.formulation == "triton")
    k = min(STEPS_PER_GRAPH, dp.steps)
    replay = None
    if static is not None and plan.formulation != "static" and dev.type == "cuda":
        replay = _graph_or_none(static, gen, k)
        if replay is None:  # capture failed under "auto": the eager path, as before
            static = None
    if static is None:
        for _ in range(dp.steps):
            eager_step()
    else:
        run_static_steps(static, dp.steps, gen, eager_step, replay, k)
    for dst, src in zip(heads.weights + heads.biases, params.weights + params.biases):
        dst.copy_(src)


def static_fits(formulation: str, data: TrainData, n_valid: torch.Tensor, steps: int) -> bool:
    """Whether DP-SGD runs as fixed-shape steps (:mod:`privaudit.train.static_steps`): asked for
    (``static``, ``graph``), or ``auto`` on CUDA for runs of at least two graphs' worth of steps (a graph
    replayed once costs more to capture than it saves); and the data have no gradient canaries (nor, for
    ``triton``, per-model extra rows) and every model some rows (the observer is checked by the caller)."""
    auto = (formulation == "auto" and data.X_base.device.type == "cuda" and steps >= 2 * STEPS_PER_GRAPH)
    if formulation not in ("static", "graph", "triton") and not auto:
        return False
    if formulation == "triton" and data.n_extra:
        raise ValueError("formulation='triton' is for DP-SGD without per-model extra rows (X_extra: its kernel reads "
                         "base rows only); use 'auto' or 'graph' for these data")
    fits = not data.n_grad and bool(n_valid.numel()) and int(n_valid.min()) > 0
    if not fits and formulation in ("static", "graph", "triton"):
        raise ValueError(f"formulation={formulation!r} is for DP-SGD without gradient canaries or an observer, every "
                         "model with some rows; use 'auto' for these data")
    return fits


def _graph_or_none(stepper: StaticDpStep, gen: torch.Generator, k: int):  # noqa: ANN202
    """The replay of ``k`` captured static DP-SGD steps, or None (see :func:`privaudit.train.cuda_graphs.captured_or_none`)."""
    return captured_or_none(lambda: capture_graph(stepper, gen, k), stepper.plan.formulation, "DP-SGD")


def _grad_selection(data: TrainData, idx: torch.Tensor, take: torch.Tensor,
                    is_grad: torch.Tensor | None = None) -> torch.Tensor | None:
    """(M, G) float: which gradient canaries are in each model's batch (None when the data have none)."""
    if not data.n_grad:
        return None
    off = data.n_base + data.n_extra
    if is_grad is None:
        is_grad = idx >= off
    sel = torch.zeros(data.n_models, data.n_grad, device=idx.device)
    mg, kg = (take & is_grad).nonzero(as_tuple=True)
    sel[mg, idx[mg, kg] - off] = 1.0
    return sel


def _dp_clipped_sum(data: TrainData, plan: _Plan, params: StackedHeads, g: torch.Tensor, grad: StackedHeads,
                    idx: torch.Tensor, take: torch.Tensor, counts: torch.Tensor, mc: int, try_shared: bool,
                    C: float, ebs: float) -> torch.Tensor | None:
    """Write the step's clipped, ``ebs``-scaled sum over each model's data rows into ``g`` (M, P)
    (``grad``: its per-layer views); every chunk's rows of ``g`` are overwritten, so ``g`` needs no zeroing.

    Returns which gradient canaries are in each model's batch, (M, G) float (None when the data
    have none, or no model has a row in its batch).
    """
    M, N, dev = data.n_models, data.n_virtual, g.device
    if idx.shape[1] == 0:  # every batch is empty
        g.zero_()
        return None
    y, xsq, is_grad = plan.labels(idx)
    sel = _grad_selection(data, idx, take, is_grad)
    mask = None
    if try_shared:
        mask = torch.zeros(M, N, dtype=torch.bool, device=dev)
        mm, kk = take.nonzero(as_tuple=True)
        mask[mm, idx[mm, kk]] = True
    weight = (take if is_grad is None else take & ~is_grad).to(g.dtype)
    n_chunks = -(-M // mc)
    if n_chunks == 1:  # the padded width is already the largest batch
        widths = [idx.shape[1]]
    else:
        widths = torch.nn.functional.pad(counts, (0, n_chunks * mc - M)).view(n_chunks, mc).amax(1).tolist()
    for c0 in range(0, M, mc):
        c1 = min(M, c0 + mc)
        bc = int(widths[c0 // mc])
        if bc == 0:  # no rows in this chunk's batches: its gradient is zero
            g[c0:c1].zero_()
            continue
        ws = [x[c0:c1] for x in params.weights]
        bs = [x[c0:c1] for x in params.biases]
        if mask is not None and _dp_shared(data, plan, ws, bs, mask[c0:c1], int(counts[c0:c1].sum()), C, ebs,
                                           grad, c0):
            continue
        X = plan.rows(c0, idx[c0:c1, :bc])
        gw, gb, _ = chunk_gradient(ws, bs, X, y[c0:c1, :bc],
                                   lambda nr, w=weight[c0:c1, :bc]: clip_factors(nr, C).mul_(w).div_(ebs),
                                   True, xsq[c0:c1, :bc])
        _put(grad, c0, gw, gb)
    return sel


def _dp_shared(data: TrainData, plan: _Plan, ws: list[torch.Tensor], bs: list[torch.Tensor], mask: torch.Tensor,
               examples: int, C: float, ebs: float, g: StackedHeads, m0: int) -> bool:
    """Clipped-sum gradient of a chunk over the union of its base rows, if it has only base rows and
    the fill rule agrees; False (nothing done) otherwise."""
    n = data.n_base
    if mask.shape[1] > n and bool(mask[:, n:].any()):
        return False
    union = mask[:, :n].any(0).nonzero().squeeze(1)
    if not _use_shared(plan, examples, mask.shape[0], len(union)):
        return False
    take = mask[:, union]
    X, y, xsq = (torch.index_select(t, 0, union) for t in (data.X_base, data.y_base, plan.xsq_base))
    gw, gb, _ = chunk_gradient(ws, bs, X, y, lambda nr: clip_factors(nr, C) * take / ebs, True, xsq)
    _put(g, m0, gw, gb)
    return True
