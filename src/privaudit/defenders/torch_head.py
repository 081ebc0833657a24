"""A torch linear/MLP head trained with minibatch SGD (``kind: torch_mlp``).

The common deep-learning recipe on frozen backbone features: cross-entropy, SGD with
momentum, a fixed number of epochs. Randomness levels follow the sklearn zoo
(:mod:`privaudit.defenders.sklearn_zoo`): ``fixed`` = initialisation from the public
``random_state`` and minibatches in data order; ``shuffled`` = same initialisation, batch order
from the fit seed; ``unseeded`` = initialisation and batch order from the fit seed.
Saved with safetensors, byte-reproducibly (:func:`privaudit.artifacts.write_safetensors`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from safetensors.torch import load_file, save
from torch import nn

from privaudit.artifacts import write_safetensors
from privaudit.defenders.base import Defender
from privaudit.defenders.registry import register
from privaudit.defenders.specs import DpSgdSpec, TorchMLPSpec
from privaudit.seeding import draw_seed

#: the spec of a torch-head trainer (alibi/agibi specs subclass TorchMLPSpec; all have ``hidden``, ``randomness``, ``random_state``)
HeadSpecT = TypeVar("HeadSpecT", bound=TorchMLPSpec | DpSgdSpec)


def build_mlp(d_in: int, hidden: list[int], n_classes: int, generator: torch.Generator | None = None) -> nn.Sequential:
    """Linear layers with ReLU between them: d_in → hidden… → n_classes logits.

    With ``generator``, weights get PyTorch's default ``nn.Linear`` initialisation
    (U(−1/√fan_in, 1/√fan_in) for weights and biases) drawn from that generator, so no
    global random state is touched.
    """
    layers: list[nn.Module] = []
    width = d_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_classes))
    net = nn.Sequential(*layers)
    if generator is not None:
        with torch.no_grad():
            for layer in net:
                if isinstance(layer, nn.Linear):
                    bound = 1.0 / layer.in_features**0.5
                    layer.weight.uniform_(-bound, bound, generator=generator)
                    layer.bias.uniform_(-bound, bound, generator=generator)
    return net


class TorchHeadDefender(Defender[HeadSpecT]):
    """A linear/MLP head (:func:`build_mlp`) saved with safetensors; subclasses implement ``fit``."""

    model_suffix = ".safetensors"

    def __init__(self, spec: HeadSpecT, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self.net: nn.Sequential | None = None
        self.d_in: int | None = None

    @property
    def deterministic(self) -> bool:
        return self.spec.randomness == "fixed"

    @property
    def order_invariant(self) -> bool:
        return False

    def _init_net(self, d_in: int, init_seed: int) -> nn.Sequential:
        gen = torch.Generator().manual_seed(init_seed)
        return build_mlp(d_in, list(self.spec.hidden), self.n_classes, generator=gen).to(self.device)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        if self.net is None:
            raise RuntimeError(f"defender {self.name!r} is not fitted")
        with torch.inference_mode():
            logits = self.net(torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=self.device))
            return torch.softmax(logits.double(), dim=1).cpu().numpy()

    def save(self, path: Path) -> None:
        if self.net is None:
            raise RuntimeError(f"defender {self.name!r} is not fitted")
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.net.state_dict().items()}
        # sorted metadata keys: the same model gives the same bytes (dvc.lock stays unchanged)
        write_safetensors(path, save(tensors, metadata={"d_in": str(self.d_in), "n_classes": str(self.n_classes)}))

    def load(self, path: Path) -> "TorchHeadDefender[HeadSpecT]":
        state = load_file(str(path))
        d_in = int(state["0.weight"].shape[1])
        self.d_in = d_in
        net = build_mlp(d_in, list(self.spec.hidden), self.n_classes)
        net.load_state_dict(state)
        self.net = net.to(self.device).eval()
        return self


@register("torch_mlp")
class TorchMLPDefender(TorchHeadDefender[TorchMLPSpec]):
    """Minibatch-SGD MLP (or linear, with ``hidden: []``) on features; not order invariant."""

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "TorchMLPDefender":
        rng = np.random.default_rng(seed)
        init_seed = self.spec.random_state if self.spec.randomness != "unseeded" else draw_seed(rng)
        self.d_in = int(X.shape[1])
        net = self._init_net(self.d_in, init_seed)
        Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=self.device)
        yt = torch.as_tensor(y, dtype=torch.long, device=self.device)
        opt = torch.optim.SGD(net.parameters(), lr=self.spec.lr, momentum=self.spec.momentum,
                              weight_decay=self.spec.weight_decay)
        loss_fn = nn.CrossEntropyLoss()
        n, bs = len(y), self.spec.batch_size
        order = torch.empty(n, dtype=torch.long, device=self.device)  # the epoch's order, one buffer for every epoch

        def step(start: int) -> None:
            idx = order[start:start + bs]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(Xt[idx]), yt[idx]).backward()
            opt.step()

        starts = range(0, n, bs)
        blocks = _graphed_epochs(step, starts, net, opt) if graphed_epochs_fit(self.device, self.spec.epochs) else None
        for _ in range(self.spec.epochs):
            order.copy_(torch.as_tensor(np.arange(n) if self.spec.randomness == "fixed" else rng.permutation(n)))
            if blocks is not None:
                blocks.run_epoch()
            else:
                for start in starts:
                    step(start)
        self.net = net.eval()
        return self


GRAPHED_EPOCHS = True
"""Whether :class:`TorchMLPDefender` on CUDA runs its epochs as blocks of steps captured in CUDA graphs
(``False``: every step eagerly; the benchmarks and the CUDA tests compare the two)."""


def graphed_epochs_fit(device: str | torch.device, epochs: int) -> bool:
    """Whether a ``torch_mlp`` fit runs its epochs in CUDA graphs: on CUDA, from two epochs (a block is captured
    once, in its first epoch, and pays from its first replay), unless :data:`GRAPHED_EPOCHS` is off.

    Issue 43: this plain PyTorch loop (the one a user would write) is bound by kernel launches on a GPU — one
    release fit of the default MLP on 50 000 × 512 took 16.6 s on an H200, ~0.7 ms a step for 23 460 steps of a
    few small kernels each. An epoch's steps are the same kernels on the same buffers every epoch (the epoch's
    order is copied into one buffer first), so :class:`privaudit.train.cuda_graphs.EpochBlocks` captures each
    block of steps once (autograd's backward and ``torch.optim.SGD``'s step included: PyTorch's "whole network
    capture", https://pytorch.org/docs/stable/notes/cuda.html#whole-network-capture) and replays it in every later
    epoch. A replay runs the eager steps' kernels, so on one device the model is the eager loop's bit for bit
    (``tests/train/test_devices.py``, on CUDA); a capture that fails leaves the loop eager, with one warning."""
    return GRAPHED_EPOCHS and torch.device(device).type == "cuda" and epochs >= 2


def _graphed_epochs(step, starts, net: nn.Module, opt: torch.optim.SGD):  # noqa: ANN001, ANN202
    """:class:`EpochBlocks` over ``step``; a capture's warm-up restores the parameters and momentum buffers."""
    from privaudit.train.cuda_graphs import EpochBlocks, captured_or_none

    def state() -> list[torch.Tensor]:
        bufs = [opt.state[p].get("momentum_buffer") for p in net.parameters()]
        # detached views: a capture restores them in place, which autograd refuses on the leaves themselves
        return [p.detach() for p in net.parameters()] + [b for b in bufs if isinstance(b, torch.Tensor)]

    return EpochBlocks(step, starts, state, lambda make: captured_or_none(make, "auto", "torch_mlp SGD"))
