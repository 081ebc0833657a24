"""Training steps captured in CUDA graphs: the one capture helper, and SGD epochs replayed block by block.

**Why.** A batched step is dozens of small kernels; on a GPU each launch costs microseconds of host time, so a
step of small heads is bound by launches, not by the GPU (issue 43: the default MLP's batched SGD call took
24 s at 50 000 rows on an H200 whatever the number of models, ``benchmarks/results/gpu/NVIDIA_H200``). A CUDA
graph replays a recorded sequence of kernels with one launch (PyTorch, "CUDA Graphs",
https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs).

:func:`capture` is the one way this package captures steps: warm-up on a side stream (cuBLAS handles and other
lazily created state), the state the warm-up changed restored, then the capture, whose kernels do not run.
:class:`EpochBlocks` runs the SGD epochs of :func:`privaudit.train.batched._train_sgd`: an epoch's steps are
the same kernels on the same buffers every epoch (the epoch's order is copied into one buffer before its
steps), so each block of :data:`STEPS_PER_BLOCK` consecutive steps is captured once, the first time it is
reached, and replayed in every later epoch. A replay runs exactly the kernels an eager step would, so on one
device the numbers are the eager path's bit for bit (``tests/train/test_devices.py``, on CUDA).

The blocks share one memory pool and replay in another order than they were captured (block 0 last): safe for
graphs that never run concurrently and read none of each other's outputs (PyTorch's "Graph memory management",
clarified in pytorch/pytorch PR 166975); nothing a block allocates outlives its replay.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

STEPS_PER_BLOCK = 32
"""SGD steps per captured graph: launch costs are paid once per this many steps."""


def capture(body: Callable[[], None], warm_up: Callable[[], None], state: Sequence[torch.Tensor],
            generator: torch.Generator | None = None, pool: tuple | None = None) -> Callable[[], None]:
    """``body`` captured in one CUDA graph; returns the graph's ``replay``.

    ``warm_up`` runs first on a side stream; every tensor of ``state`` (what ``warm_up`` may change: the
    parameters, an optimizer's buffers, flags) is restored afterwards, and again after the capture, as is
    ``generator``'s state (registered with the graph, so that replays draw fresh numbers from it). ``pool``: a
    memory pool shared with graphs replayed in turn (``torch.cuda.graph_pool_handle()``). Raises what capture
    raises (an op that reads back to the host, a torch without ``register_generator_state``)."""
    saved = [t.clone() for t in state]
    saved_gen = generator.get_state() if generator is not None else None
    device = state[0].device
    try:
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            warm_up()
        torch.cuda.current_stream(device).wait_stream(side)
        for t, s in zip(state, saved):
            t.copy_(s)
        graph = torch.cuda.CUDAGraph()
        if generator is not None:
            graph.register_generator_state(generator)
        # thread_local: CUDA work of other threads (a threaded scheduler's) neither breaks the capture nor fails
        with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
            body()
    finally:
        for t, s in zip(state, saved):
            t.copy_(s)
        if generator is not None and not torch.equal(generator.get_state(), saved_gen):
            generator.set_state(saved_gen)
    return graph.replay


_warned = False


def captured_or_none(make: Callable[[], Callable[[], None]], formulation: str, what: str):  # noqa: ANN201
    """``make()`` (a capture, returning its replay); None (with a warning, once per process) when capture fails
    under ``formulation="auto"``, whose caller then trains eagerly; ``"graph"`` and ``"triton"`` re-raise."""
    global _warned
    try:
        return make()
    except Exception as exc:  # noqa: BLE001 — any capture failure leaves the eager path, which is always right
        if formulation in ("graph", "triton"):
            raise
        if not _warned:
            _warned = True
            warnings.warn(f"privaudit: capturing {what} steps in a CUDA graph failed ({type(exc).__name__}: {exc}); "
                          "training with eager steps (same draws, slower)", RuntimeWarning, stacklevel=3)
        return None


class EpochBlocks:
    """An epoch's steps (``starts``: one argument of ``step`` per step) run as blocks of ``k`` steps, each block
    captured in a CUDA graph the first time it is reached and replayed in every later epoch.

    The first block of the first epoch runs eagerly: it creates what the steps create once (an optimizer's
    momentum buffers) before anything is captured. ``state()`` lists the tensors a warm-up may change (they are
    restored). ``captured(make)`` calls ``make()`` (which captures and returns a replay) and returns the replay,
    or None where capture failed and the caller's policy is to go on eagerly (it raises otherwise); after one
    failure every block runs eagerly. ``capture_fn``: :func:`capture` unless given (tests give a stand-in).
    """

    def __init__(self, step: Callable[[int], None], starts: Sequence[int], state: Callable[[], list[torch.Tensor]],
                 captured: Callable[[Callable[[], Callable[[], None]]], Callable[[], None] | None],
                 k: int = STEPS_PER_BLOCK, capture_fn: Callable[..., Callable[[], None]] | None = None) -> None:
        self.step, self.starts, self.state, self.captured, self.k = step, list(starts), state, captured, max(1, k)
        self.capture_fn = capture_fn or capture
        self.replays: dict[int, Callable[[], None]] = {}
        self.epochs = 0
        self.failed = False
        self.pool = None

    def _eager(self, block: Sequence[int]) -> None:
        for s in block:
            self.step(s)

    def run_epoch(self) -> None:
        """One epoch: every step once, in order."""
        for j in range(0, len(self.starts), self.k):
            block = self.starts[j:j + self.k]
            if self.failed or (self.epochs == 0 and j == 0):
                self._eager(block)
                continue
            if j not in self.replays:
                if self.pool is None and torch.cuda.is_available():
                    self.pool = torch.cuda.graph_pool_handle()  # one pool: the blocks replay one after another
                replay = self.captured(lambda b=block: self.capture_fn(lambda: self._eager(b), lambda: self._eager(b),
                                                                       self.state(), None, self.pool))
                if replay is None:
                    self.failed = True
                    self._eager(block)
                    continue
                self.replays[j] = replay
            self.replays[j]()
        self.epochs += 1
