"""A user's own opacus DP-SGD loop as a ``kind: python`` defender that privaudit can audit white-box.

The one privaudit line is ``privaudit.hooks.watch(opt, dataset_size=len(X))``: outside an audit it
returns the optimizer untouched; during the white-box audit it records what this loop's sampling,
clipping and noise really do. Declare the defender with ``observable: true`` (docs/howto/own-trainer.md).
"""

from __future__ import annotations

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.accountants.utils import get_noise_multiplier
from opacus.optimizers import DPOptimizer

import privaudit.hooks


class LinearHead(torch.nn.Module):
    def __init__(self, d: int, n_classes: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(d, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(self(torch.as_tensor(X, dtype=torch.float32)), 1).double().numpy()


def train(X, y, n_classes, seed, epsilon=1.0, delta=1e-5, epochs=20, batch_size=64, lr=0.5, max_grad_norm=1.0,
          accountant="prv", sample_rate=None, steps=None):
    """DP-SGD with Poisson batches; σ calibrated by opacus's ``accountant`` for (epsilon, delta)
    (declare the same ``accountant`` in the defender spec).

    ``sample_rate`` and ``steps`` (options) fix q and T, as a declared ``subsampled_gaussian`` mechanism
    states them for the Defender set; without them q = batch_size / len(X) and T = epochs × round(len(X) /
    batch_size), which change slightly when an audit's canary run adds rows (docs/howto/declare-mechanism.md).
    """
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    q = batch_size / len(X) if sample_rate is None else float(sample_rate)
    steps = epochs * round(len(X) / batch_size) if steps is None else int(steps)
    sigma = get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps,
                                 accountant=accountant)
    with torch.random.fork_rng():  # initial weights drawn from `seed` too, without touching the global RNG
        torch.manual_seed(seed)
        head = LinearHead(X.shape[1], n_classes)
    model = GradSampleModule(head)
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=lr), noise_multiplier=sigma,
                      max_grad_norm=max_grad_norm, expected_batch_size=batch_size, generator=gen)
    opt = privaudit.hooks.watch(opt, dataset_size=len(X))  # the white-box audit's one line
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    for _ in range(steps):
        idx = torch.as_tensor(np.flatnonzero(rng.random(len(X)) < q), dtype=torch.long)
        # an empty Poisson batch is a step too: opacus adds the same noise to a zero sum (the mean
        # loss of no row is NaN, but no per-example row carries it into the step); skipping it
        # would show that the batch was empty
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(Xt[idx]), yt[idx]).backward()
        opt.step()
    model.remove_hooks()
    return head


def load(state, n_classes, **options):
    """Rebuild the head from its saved state (``loader:`` of the defender spec)."""
    head = LinearHead(state["fc.weight"].shape[1], n_classes)
    head.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
    return head
