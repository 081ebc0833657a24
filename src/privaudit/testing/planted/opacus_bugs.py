"""Planted-bug catalogue: opacus DP-SGD trainers that claim (ε, δ) for a linear head, most of them wrong.

Every recipe is a user trainer in the ``kind: python`` protocol
``train(X, y, n_classes, seed, **options) -> model`` written as an ordinary opacus loop
(``GradSampleModule`` + ``DPOptimizer`` or a subclass + ``DPDataLoader``) that calls
``privaudit.hooks.watch(optimizer, dataset_size=len(X))`` once.  All claim the ε that opacus's
accountant gives for the *intended* recipe: σ from ``get_noise_multiplier(ε, δ, q, T)`` with
``q = batch_size / n`` and ``T = epochs · round(1/q)`` Poisson steps.

=======================  ==========================================================================
``correct``              the intended recipe
``sigma_div4``           (a) σ divided by 4 (a units slip)
``sigma_10x_data``       (b) σ calibrated for a data set 10× larger (q/10, 10× the steps)
``no_clipping``          (c) a DPOptimizer subclass whose clip_and_accumulate sums unclipped rows
``no_noise``             (d) ``noise_multiplier=0`` left in the config
``noise_once_per_epoch`` (e) a subclass adding noise at the first step of each epoch only
``reused_noise``         (f) a subclass drawing one noise vector and reusing it every step
``shuffled_batches``     (g) a shuffled DataLoader (fixed-size batches, each row once per epoch)
                         accounted as if Poisson-sampled
=======================  ==========================================================================

Randomness: model init, data loader and noise each use a ``torch.Generator`` seeded from ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.data_loader import DPDataLoader
from opacus.optimizers import DPOptimizer
from opacus.optimizers.optimizer import _check_processed_flag, _generate_noise, _mark_as_processed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import privaudit.hooks

DEFAULTS: dict[str, Any] = dict(epsilon=1.0, delta=1e-5, epochs=5, batch_size=20, lr=0.5, max_grad_norm=1.0,
                                accountant="prv")


@lru_cache(maxsize=64)
def noise_multiplier(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    """σ that opacus's accountant calibrates for (ε, δ) at rate q over ``steps`` steps."""
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps,
                                      accountant=accountant))


def recipe(n: int, **options: Any) -> dict[str, Any]:
    """The intended recipe's numbers for ``n`` rows: q, steps, steps per epoch and σ."""
    o = {**DEFAULTS, **options}
    q = o["batch_size"] / n
    per_epoch = max(1, round(1 / q))
    steps = o["epochs"] * per_epoch
    return dict(o, q=q, steps=steps, steps_per_epoch=per_epoch,
                sigma=noise_multiplier(o["epsilon"], o["delta"], q, steps, o["accountant"]))


# ---- buggy optimizers ---------------------------------------------------------------------------

class NoClipDPOptimizer(DPOptimizer):
    """(c) sums the per-example gradients without clipping them."""

    def clip_and_accumulate(self) -> None:
        for p in self.params:
            _check_processed_flag(p.grad_sample)
            grad = self._get_flat_grad_sample(p).sum(dim=0)
            p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad
            _mark_as_processed(p.grad_sample)


class EpochNoiseDPOptimizer(DPOptimizer):
    """(e) adds noise at the first step of every epoch, none at the others."""

    def __init__(self, *args: Any, steps_per_epoch: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps_per_epoch = steps_per_epoch
        self.calls = 0

    def add_noise(self) -> None:
        if self.calls % self.steps_per_epoch == 0:
            super().add_noise()
        else:
            for p in self.params:
                _check_processed_flag(p.summed_grad)
                p.grad = p.summed_grad.clone().view_as(p)
                _mark_as_processed(p.summed_grad)
        self.calls += 1


class ReusedNoiseDPOptimizer(DPOptimizer):
    """(f) draws the noise once and adds the same vector at every step."""

    def add_noise(self) -> None:
        if not hasattr(self, "_cached_noise"):
            self._cached_noise = [_generate_noise(std=self.noise_multiplier * self.max_grad_norm,
                                                  reference=p.summed_grad, generator=self.generator)
                                  for p in self.params]
        for p, noise in zip(self.params, self._cached_noise):
            _check_processed_flag(p.summed_grad)
            p.grad = (p.summed_grad + noise).view_as(p)
            _mark_as_processed(p.summed_grad)


# ---- the model and the loop -----------------------------------------------------------------------

class LinearHead:
    """Softmax linear head returned by the trainers (``predict_proba``, ``state_dict``)."""

    def __init__(self, net: nn.Linear) -> None:
        self.net = net.eval()

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(self.net(torch.as_tensor(X, dtype=torch.float32)), dim=1).numpy()

    def state_dict(self) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy() for k, v in self.net.state_dict().items()}


def _train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, bug: str, **options: Any) -> LinearHead:
    n = len(X)
    r = recipe(n, **options)
    sigma = r["sigma"]
    if bug == "sigma_div4":
        sigma = sigma / 4
    elif bug == "sigma_10x_data":
        sigma = recipe(10 * n, **options)["sigma"]
    elif bug == "no_noise":
        sigma = 0.0
    seeds = np.random.SeedSequence(seed).generate_state(3)
    init_gen, data_gen, noise_gen = (torch.Generator().manual_seed(int(s)) for s in seeds)
    net = nn.utils.skip_init(nn.Linear, X.shape[1], n_classes)  # no draw from torch's global RNG
    with torch.no_grad():
        net.weight.copy_(torch.randn(net.weight.shape, generator=init_gen) * 0.01)
        net.bias.zero_()
    gsm = GradSampleModule(net)
    kwargs: dict[str, Any] = dict(noise_multiplier=sigma, max_grad_norm=r["max_grad_norm"],
                                  expected_batch_size=r["batch_size"], generator=noise_gen)
    base = torch.optim.SGD(gsm.parameters(), lr=r["lr"])
    if bug == "no_clipping":
        opt: DPOptimizer = NoClipDPOptimizer(base, **kwargs)
    elif bug == "noise_once_per_epoch":
        opt = EpochNoiseDPOptimizer(base, steps_per_epoch=r["steps_per_epoch"], **kwargs)
    elif bug == "reused_noise":
        opt = ReusedNoiseDPOptimizer(base, **kwargs)
    else:
        opt = DPOptimizer(base, **kwargs)
    opt = privaudit.hooks.watch(opt, dataset_size=n)
    ds = TensorDataset(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long))
    if bug == "shuffled_batches":
        loader: DataLoader = DataLoader(ds, batch_size=r["batch_size"], shuffle=True, generator=data_gen)
    else:
        loader = DPDataLoader(ds, sample_rate=r["q"], generator=data_gen)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(r["epochs"]):
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            loss_fn(gsm(xb), yb).backward()
            opt.step()
    gsm.remove_hooks()
    return LinearHead(net)


def _trainer(bug: str) -> Callable[..., LinearHead]:
    def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, **options: Any) -> LinearHead:
        return _train(X, y, n_classes, seed, bug, **options)

    train.__name__ = train.__qualname__ = f"train_{bug}"
    return train


def _acc(sigma: float, q: float, steps: int, delta: float, accountant: str) -> float:
    from privaudit.defenders.dp_sgd import accountant_epsilon

    return accountant_epsilon(sigma, q, steps, delta, accountant)


@dataclass(frozen=True)
class PlantedRecipe:
    """A recipe of the catalogue; ``caught_by`` is how the audit must catch it ("" = must pass)."""

    name: str
    description: str
    train: Callable[..., LinearHead]
    caught_by: str  # "epsilon" (ε̂ > claim) or the name of the check that must fail

    def true_epsilon(self, n: int, *, true_by: str | None = None, **options: Any) -> float | str:
        """ε of the recipe as implemented ('inf' / 'n/a' where no accountant applies): σ calibrated
        with ``options['accountant']``, ε of the resulting mechanism by ``true_by`` (default: the same
        accountant; 'prv' gives a sound upper end of the true ε)."""
        r = recipe(n, **options)
        acc = true_by or r["accountant"]
        if self.name == "correct":
            return _acc(r["sigma"], r["q"], r["steps"], r["delta"], acc)
        if self.name == "sigma_div4":
            return _acc(r["sigma"] / 4, r["q"], r["steps"], r["delta"], acc)
        if self.name == "sigma_10x_data":
            return _acc(recipe(10 * n, **options)["sigma"], r["q"], r["steps"], r["delta"], acc)
        if self.name in ("no_clipping", "no_noise", "noise_once_per_epoch", "reused_noise"):
            return "inf"
        return "n/a"


CORRECT = PlantedRecipe("correct", "the intended recipe (Poisson batches, clipping, fresh noise each step)",
                        _trainer("correct"), "")
BUGS: dict[str, PlantedRecipe] = {b.name: b for b in (
    PlantedRecipe("sigma_div4", "(a) σ divided by 4", _trainer("sigma_div4"), "epsilon"),
    PlantedRecipe("sigma_10x_data", "(b) σ calibrated for a 10× larger data set", _trainer("sigma_10x_data"),
                  "epsilon"),
    PlantedRecipe("no_clipping", "(c) per-example gradients summed unclipped", _trainer("no_clipping"), "epsilon"),
    PlantedRecipe("no_noise", "(d) noise_multiplier = 0", _trainer("no_noise"), "epsilon"),
    PlantedRecipe("noise_once_per_epoch", "(e) noise at one step per epoch", _trainer("noise_once_per_epoch"),
                  "noise_homogeneity_steps"),
    PlantedRecipe("reused_noise", "(f) one noise draw reused every step", _trainer("reused_noise"),
                  "noise_independence"),
    PlantedRecipe("shuffled_batches", "(g) shuffled fixed-size batches accounted as Poisson",
                  _trainer("shuffled_batches"), "poisson_sampling"),
)}
CATALOGUE: dict[str, PlantedRecipe] = {"correct": CORRECT, **BUGS}


def tiny_data(seed: int = 0, n: int = 200, d: int = 8, n_classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Standardised Gaussian blobs: (n, d) float32 features and (n,) int64 labels."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n_classes, d)) * 1.5
    y = rng.integers(0, n_classes, n)
    X = centers[y] + rng.standard_normal((n, d))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X.astype(np.float32), y.astype(np.int64)


def caught(result: Any, recipe_: PlantedRecipe, claim: float) -> bool:
    """True when the audit refutes the claim (ε̂ > claim or a failed check)."""
    return bool(result.overclaims(claim))


__all__ = ["CATALOGUE", "BUGS", "CORRECT", "PlantedRecipe", "tiny_data", "recipe", "noise_multiplier",
           "LinearHead", "NoClipDPOptimizer", "EpochNoiseDPOptimizer", "ReusedNoiseDPOptimizer", "caught",
           "DEFAULTS"]
