"""DP-SGD steps of one fixed shape, replayed as CUDA graphs: the batched trainer without launch overhead.

**Why.** The eager step of :func:`privaudit.train.batched._train_dp` launches about 60 small kernels
and reads three values back to the host per step (the gap loop's "is some model's data set not yet
covered", the largest batch, the chunk widths). On a GPU each kernel takes microseconds, so the step
is bound by launches and syncs: 1000 linear heads × 15 620 steps on 50 000 × 512 took 16.1 s on an
H200, about 1 ms a step (issue 43).

**How.** :class:`StaticDpStep` is the same DP-SGD step (Abadi et al. 2016, Algorithm 1, with opacus's
clip factor and division by the expected batch size; per-example norms by the ghost identity of
:mod:`privaudit.train.heads`) with every shape fixed and nothing read back:

* the Poisson batch is the eager path's first block of G geometric gaps (:func:`gap_block`, as in
  :func:`privaudit.train.batched.poisson_batches`: the same draws from the same generator), kept at
  width G — slots past a model's data set get weight 0 instead of being cut off at the largest batch
  (a masked batch of static shape rather than a gathered one of data-dependent shape);
* "some model's data set goes on past its last draw" (the eager path then draws another block) is a
  flag on the device, not a branch; the one-hot labels are subtracted as a mask, not scattered.

:func:`run_static_steps` captures K such steps (:data:`STEPS_PER_GRAPH`) in one ``torch.cuda.CUDAGraph``,
the generator registered with it so that replays draw the numbers eager calls would, and replays it;
after each replay the host reads the flag once. If it is set (rare: a block covers the mean batch +
6 standard deviations + 8), the K steps are undone (parameters and generator state saved before the
replay) and redone with the eager step, which draws the extra gaps. So the random numbers, and the
distribution of every batch, are the eager path's, always.

**Numbers.** The same draws as the eager path; the gradient differs from it in the last bits only
(GEMMs of width G instead of the largest batch, the padding adding exact zeros). A graph replays the
static step's kernels, so on one device a graphed run equals the static step run eagerly
(``formulation="static"``) bit for bit (``tests/train/test_devices.py``, on CUDA).

**Where.** DP-SGD (linear or MLP heads) on CUDA, without gradient canaries or a white-box observer
(those runs keep the eager path). Per-model extra rows (the black-box audit's and Game 3's input
canaries) are rows of one table after the base rows, so a slot's row is one gather as for a base row
(the eager path puts the same values there by a mask). The sixth H200 lease's 50 000 × 512 audit ran
its 4 000 black-box DP-SGD models eagerly for want of this: 17 s per 1 000 models against the plan's
5 s (timed on the graphed steps). ``formulation="static"`` runs the static step without graphs on any
device, which is how the CPU tests check it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from privaudit.train.cuda_graphs import capture
from privaudit.train.heads import StackedHeads, chunk_gradient, clip_factors
from privaudit.train.noise import draw_noise, draw_standard_noise

STEPS_PER_GRAPH = 32
"""DP-SGD steps captured in one CUDA graph: launch and sync costs are paid once per this many steps."""


def gap_block(q: float, v_max: int) -> int:
    """Width G of one block of Geometric(q) gaps for data sets of at most ``v_max`` rows: about the mean
    batch q·v_max + 6 standard deviations + 8 (all ``v_max`` rows when q = 1: no gaps are drawn)."""
    if q == 1.0:
        return max(1, v_max)
    mean = q * v_max
    return max(1, min(v_max, int(mean + 6.0 * mean**0.5 + 8)))


class StaticDpStep:
    """One DP-SGD step on all M models with fixed shapes and no host sync (see the module docstring).

    Works in place on the trainer's flat buffers: ``flat`` (M, P) parameters, ``g`` (M, P) the step's
    gradient with per-layer views ``grad``, ``params`` per-layer views of ``flat``, ``noise`` (M, P).
    ``plan`` is the trainer's :class:`privaudit.train.batched._Plan` (‖x‖², chunk sizes). Every buffer a
    step writes outside its temporaries is allocated here and kept, so a captured graph stays valid.
    """

    def __init__(self, *, data, plan, flat: torch.Tensor, params: StackedHeads, g: torch.Tensor,  # noqa: ANN001
                 grad: StackedHeads, noise: torch.Tensor, table: torch.Tensor | None, n_valid: torch.Tensor,
                 q: float, max_grad_norm: float, noise_multiplier: float, expected_batch_size: float,
                 lr: float, put: Callable[[StackedHeads, int, list[torch.Tensor], list[torch.Tensor]], None],
                 fused: bool = False) -> None:
        self.data, self.plan, self.flat, self.params, self.g, self.grad = data, plan, flat, params, g, grad
        self.noise, self.table, self.n_valid, self.put = noise, table, n_valid, put
        self.M, self.dev = data.n_models, flat.device
        self.q, self.C, self.ebs, self.lr = q, float(max_grad_norm), float(expected_batch_size), float(lr)
        self.std = float(noise_multiplier) * float(max_grad_norm)
        self.v_max = int(n_valid.max())
        self.G = gap_block(q, self.v_max)
        self.log_keep = math.log1p(-q) if q < 1.0 else 0.0
        self.mc = plan.chunk_models(self.G, False)
        self.cols = torch.arange(self.G, device=self.dev)
        # its own row buffer (not the plan's, which eager steps may reallocate): a captured graph keeps its address
        d = int(data.X_base.shape[1])
        # per-model extra rows (input canaries: model m's extra row e is virtual row n + e) as rows of one table
        # after the base rows, at n + m·E + e: a slot's row, label and ‖x‖² are one index_select away, with no
        # mask and no host read (the values the eager path puts there; None: the base rows alone)
        n, E = data.n_base, data.n_extra
        self.X_rows, self.y_rows, self.xsq_rows = data.X_base, data.y_base, plan.xsq_base
        self.extra_offset = None
        if E:
            self.X_rows = torch.cat([data.X_base, data.X_extra.reshape(self.M * E, d).to(data.X_base.dtype)])
            self.y_rows = torch.cat([data.y_base, data.y_extra.reshape(-1).to(data.y_base.dtype)])
            self.xsq_rows = torch.cat([plan.xsq_base, plan.xsq_extra.reshape(-1).to(plan.xsq_base.dtype)])
            self.extra_offset = (torch.arange(self.M, device=self.dev) * E).unsqueeze(1)
        self.rows_buf = torch.empty(min(self.mc, self.M) * self.G * d, dtype=data.X_base.dtype, device=self.dev)
        self.overflow = torch.zeros((), dtype=torch.bool, device=self.dev)
        self.fused = fused  # the clipped sum by privaudit.train.fused_triton (linear heads), not torch ops

    def batches(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's Poisson batches at width G: ``idx`` (M, G) virtual rows (0 on padding) and ``take``
        (M, G) bool; the first ``counts.max()`` columns equal :func:`poisson_batches`'s output whenever
        one block of gaps covers every model (else :attr:`overflow` is set)."""
        M, G = self.M, self.G
        if self.q == 1.0:
            p = self.cols.expand(M, G)
            take = p < self.n_valid.unsqueeze(1)
        else:
            u = torch.rand(M, G, dtype=torch.float64, device=self.dev, generator=gen)
            pos = u.neg_().log1p_().div_(self.log_keep).floor_().add_(1.0).long().cumsum_(1)
            self.overflow.logical_or_((pos[:, -1] <= self.n_valid).any())
            take = pos <= self.n_valid.unsqueeze(1)
            p = pos.sub_(1)
        t = self.table
        idx = (p if t is None else t.gather(1, p.clamp(max=t.shape[1] - 1))).masked_fill(~take, 0)
        return idx, take

    def step(self, gen: torch.Generator) -> None:
        """Draw the batches, write the clipped sum into ``g``, add the noise and update ``flat``."""
        idx, take = self.batches(gen)
        M, G = self.M, self.G
        if self.fused:
            from privaudit.train.fused_triton import linear_clipped_sum

            data = self.data
            from privaudit.train.fused_triton import noise_and_update

            linear_clipped_sum(data.X_base, data.y_base, self.plan.xsq_base, idx, take.sum(1), self.flat, self.g,
                               self.C, self.ebs)
            draw_standard_noise(self.noise, gen)  # the eager path's draws (the native stream on the CPU)
            noise_and_update(self.flat, self.g, self.noise, self.std / self.ebs, self.lr)
            return
        if self.extra_offset is not None:  # model m's extra rows sit at n + m·E + e in the row tables
            idx = torch.where(idx >= self.data.n_base, idx + self.extra_offset, idx)
        flat_idx = idx.reshape(-1)
        y = torch.index_select(self.y_rows, 0, flat_idx).view(M, G)
        xsq = torch.index_select(self.xsq_rows, 0, flat_idx).view(M, G)
        weight = take.to(self.g.dtype)
        C, ebs, d = self.C, self.ebs, int(self.data.X_base.shape[1])
        for c0 in range(0, M, self.mc):
            c1 = min(M, c0 + self.mc)
            X = torch.index_select(self.X_rows, 0, idx[c0:c1].reshape(-1),
                                   out=self.rows_buf[:(c1 - c0) * G * d].view((c1 - c0) * G, d)).view(c1 - c0, G, d)
            gw, gb, _ = chunk_gradient([w[c0:c1] for w in self.params.weights], [b[c0:c1] for b in self.params.biases],
                                       X, y[c0:c1], lambda nr, w=weight[c0:c1]: clip_factors(nr, C).mul_(w).div_(ebs),
                                       True, xsq[c0:c1], one_hot_by_mask=True)
            self.put(self.grad, c0, gw, gb)
        self._noise_and_update(gen)

    def _noise_and_update(self, gen: torch.Generator) -> None:
        draw_noise(self.noise, gen, self.std / self.ebs)
        self.g += self.noise
        self.flat.sub_(self.g.mul_(self.lr))


def capture_graph(stepper: StaticDpStep, gen: torch.Generator, k: int) -> Callable[[], None]:
    """``k`` static steps captured in one CUDA graph (:func:`privaudit.train.cuda_graphs.capture`); returns its
    ``replay``. The warm-up (two steps) draws from a throw-away generator and leaves nothing behind: the
    parameters, the overflow flag and ``gen``'s state are restored. Raises what capture raises."""
    scratch = torch.Generator(device=stepper.flat.device).manual_seed(0)

    def warm_up() -> None:
        for _ in range(2):
            stepper.step(scratch)

    def body() -> None:
        for _ in range(k):
            stepper.step(gen)

    return capture(body, warm_up, [stepper.flat, stepper.overflow], gen)


def run_static_steps(stepper: StaticDpStep, steps: int, gen: torch.Generator, eager_step: Callable[[], None],
                     replay: Callable[[], None] | None = None, k: int = STEPS_PER_GRAPH) -> int:
    """``steps`` DP-SGD steps: blocks of ``k`` static steps (``replay``: a captured graph of them; None:
    run eagerly), each block undone and redone with ``eager_step`` when its overflow flag is set; the
    last ``steps mod k`` with ``eager_step``. Returns how many blocks were redone."""
    if replay is None:
        def replay() -> None:
            for _ in range(k):
                stepper.step(gen)
    backup = torch.empty_like(stepper.flat)
    done = redone = 0
    while done + k <= steps:
        state = gen.get_state()
        backup.copy_(stepper.flat)
        replay()
        if bool(stepper.overflow):  # the one host read of the block
            stepper.flat.copy_(backup)
            gen.set_state(state)
            stepper.overflow.zero_()
            for _ in range(k):
                eager_step()
            redone += 1
        done += k
    for _ in range(steps - done):
        eager_step()
    return redone
