"""DP-SGD through opacus at a target (ε, δ) (``kind: dp_sgd``).

Abadi et al. 2016 DP-SGD on a linear or MLP head (:func:`privaudit.defenders.torch_head.build_mlp`):
each step draws a Poisson batch (every training row independently with probability
``q = batch_size / n_train``), clips every per-example gradient to L2 norm ``max_grad_norm`` (C),
sums, adds ``N(0, σ²C² I)`` and divides by the *expected* batch size; plain SGD, no momentum.
Per-example gradients, clipping and noise come from opacus (``GradSampleModule`` + ``DPOptimizer``);
σ comes from opacus's ``get_noise_multiplier`` for ``q`` and ``steps = epochs × round(1/q)`` so that
the chosen accountant (``rdp`` | ``prv`` | ``gdp``) certifies ε ≤ target. After training the same
accountant, fed the steps actually taken, gives :meth:`DpSgdDefender.claimed_epsilon`.

Randomness: the Poisson masks come from a numpy Generator and the noise from a
``torch.Generator``, both derived from the ``seed`` passed to :meth:`fit` (never global state).
``randomness: shuffled`` initialises the weights from the public ``random_state``;
``unseeded`` draws the initialisation from ``seed`` too. Either way the recipe is random given
its public settings (the noise is secret), so ``deterministic`` is False.

The spec is a contract the batched canary trainer (:mod:`privaudit.train`) codes against:
:func:`noise_multiplier`, :meth:`DpSgdSpec.sample_rate <privaudit.defenders.specs.DpSgdSpec.sample_rate>` and
:meth:`~privaudit.defenders.specs.DpSgdSpec.steps` give the exact recipe (the defender's methods of the
same names call them).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import nn

from privaudit.compat.opacus_warnings import opacus_noise_filtered
from privaudit.claims.mechanisms import SubsampledGaussianMechanism
from privaudit.defenders import sigma_memo
from privaudit.defenders.registry import register
from privaudit.defenders.specs import DpSgdSpec
from privaudit.defenders.torch_head import TorchHeadDefender, build_mlp
from privaudit.seeding import draw_seed


@lru_cache(maxsize=256)
def _sigma(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    """opacus's σ, remembered on disk across stages (:mod:`privaudit.defenders.sigma_memo`)."""
    key = sigma_memo.memo_key(epsilon, delta, q, steps, accountant)
    remembered = sigma_memo.lookup(key)
    if remembered is not None:
        return remembered
    from opacus.accountants.utils import get_noise_multiplier  # opacus is imported only to train

    with opacus_noise_filtered(accountant):
        sigma = float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q,
                                           steps=steps, accountant=accountant))
    sigma_memo.store(key, sigma)
    return sigma


def noise_multiplier(spec: DpSgdSpec, n_train: int) -> float:
    """σ from opacus ``get_noise_multiplier`` for the spec's (ε, δ), q and steps at ``n_train`` rows
    under its accountant (:meth:`DpSgdSpec.sample_rate`, :meth:`DpSgdSpec.steps`)."""
    return dp_sgd_mechanism(spec, n_train).noise_multiplier


def dp_sgd_mechanism(spec: DpSgdSpec, n_train: int) -> SubsampledGaussianMechanism:
    """The mechanism a ``dp_sgd`` recipe runs on ``n_train`` rows: σ, q and T, derived here only (the
    trainer, the batched recipe, the claim and the black-box ceiling all read them from this).

    ``T = epochs × round(1/q)`` Poisson-subsampled Gaussian steps at ``q = batch_size / n_train``, σ from
    opacus ``get_noise_multiplier`` for the spec's (ε, δ) under its accountant.
    """
    q, steps = spec.sample_rate(n_train), spec.steps(n_train)
    sigma = _sigma(spec.epsilon, spec.delta, q, steps, spec.accountant)
    return SubsampledGaussianMechanism(kind="subsampled_gaussian", noise_multiplier=float(sigma),
                                       sample_rate=float(q), steps=int(steps))


def accountant_epsilon(sigma: float, q: float, steps: int, delta: float, accountant: str) -> float:
    """ε after ``steps`` Poisson-subsampled Gaussian steps (σ, q) by the opacus ``accountant``."""
    from opacus.accountants import create_accountant

    acc = create_accountant(mechanism=accountant)
    acc.history = [(sigma, q, steps)]
    with opacus_noise_filtered(accountant):
        return float(acc.get_epsilon(delta=delta))


_BLOCK_UNIFORMS = 1 << 22
"""Uniforms drawn per block of steps by :func:`_poisson_index_blocks` (32 MiB of float64)."""


def _poisson_index_blocks(rng: np.random.Generator, n: int, q: float, steps: int,
                          device: str) -> Iterator[torch.Tensor]:
    """Each step's Poisson batch (row i kept when its uniform is < q), as index tensors on ``device``.

    The uniforms of a block of steps are drawn in one ``rng.random((S, n))`` call (the same numbers, in
    the same order, as S calls of ``rng.random(n)``: numpy's generators fill arrays element by element),
    and the block's indices reach the device in one copy; each step's batch is a slice of it. Per
    step this saves a numpy draw, a host→device copy (a sync on CUDA) and a tensor construction.
    """
    block = max(1, min(steps, _BLOCK_UNIFORMS // max(1, n)))
    done = 0
    while done < steps:
        S = min(block, steps - done)
        rows, cols = np.nonzero(rng.random((S, n)) < q)  # row-major: each step's rows in increasing order
        bounds = np.searchsorted(rows, np.arange(S + 1)).tolist()
        idx = torch.as_tensor(cols, dtype=torch.long, device=device)
        for s in range(S):
            yield idx[bounds[s]:bounds[s + 1]]
        done += S


@register("dp_sgd")
class DpSgdDefender(TorchHeadDefender[DpSgdSpec]):
    """DP-SGD head; saved with safetensors like :class:`~privaudit.defenders.torch_head.TorchMLPDefender`
    (same layer names)."""

    def __init__(self, spec: DpSgdSpec, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self.n_train: int | None = None
        self.steps_taken: int | None = None

    @property
    def deterministic(self) -> bool:
        return False

    @property
    def order_invariant(self) -> bool:
        return False

    # --- the recipe, for the batched trainer -------------------------------------------------
    def sample_rate(self, n_train: int) -> float:
        """Poisson sampling rate q = batch_size / n_train (capped at 1)."""
        return self.spec.sample_rate(n_train)

    def steps(self, n_train: int) -> int:
        """Number of DP-SGD steps: epochs × round(1/q)."""
        return self.spec.steps(n_train)

    def noise_multiplier(self, n_train: int) -> float:
        """σ from opacus ``get_noise_multiplier`` (:func:`noise_multiplier`)."""
        return noise_multiplier(self.spec, n_train)

    # --- training ---------------------------------------------------------------------------
    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "DpSgdDefender":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        from privaudit import hooks

        n = len(y)
        if n < 1:
            raise ValueError(f"defender {self.name!r}: DP-SGD needs at least one training row")
        rng = np.random.default_rng(seed)
        init_seed = self.spec.random_state if self.spec.randomness == "shuffled" else draw_seed(rng)
        noise_gen = torch.Generator(device=self.device).manual_seed(int(rng.integers(2**63 - 1)))
        mech = dp_sgd_mechanism(self.spec, n)
        q, steps, sigma = mech.sample_rate, mech.steps, mech.noise_multiplier
        self.d_in = int(X.shape[1])
        net = build_mlp(self.d_in, list(self.spec.hidden), self.n_classes,
                        generator=torch.Generator().manual_seed(init_seed)).to(self.device)
        gsm = GradSampleModule(net, loss_reduction="mean")
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=self.spec.lr, momentum=0.0),
                          noise_multiplier=sigma, max_grad_norm=self.spec.max_grad_norm,
                          expected_batch_size=self.spec.batch_size, loss_reduction="mean", generator=noise_gen)
        opt = hooks.watch(opt, dataset_size=n)  # white-box audit hook: returns opt untouched unless recording
        Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=self.device)
        yt = torch.as_tensor(y, dtype=torch.long, device=self.device)
        loss_fn = nn.CrossEntropyLoss()
        # torch warns on every run that the hook fires on the data layer: noise (privaudit.compat.opacus_warnings)
        with opacus_noise_filtered():
            for it in _poisson_index_blocks(rng, n, q, steps, self.device):
                opt.zero_grad(set_to_none=True)
                # An empty Poisson batch goes through the optimizer like any other: opacus sums zero
                # per-example rows and adds the same noise (the mean loss of no row is NaN, but its
                # per-example gradients have no row, so nothing NaN reaches the step). The white-box
                # hook then observes the step as B_t = 0 instead of missing it.
                loss_fn(gsm(Xt[it]), yt[it]).backward()
                opt.step()
        gsm.zero_grad(set_to_none=True)
        gsm.remove_hooks()
        for p in net.parameters():
            p.grad_sample = None  # type: ignore[attr-defined]
        self.net = net.eval()
        self.n_train, self.steps_taken = n, steps
        return self

    def _epsilons(self, n_train: int, steps: int) -> tuple[float, float]:
        """(the accountant's ε, the mechanism's own ε) at the spec's δ for ``steps`` steps on ``n_train`` rows."""
        mech = dp_sgd_mechanism(self.spec, n_train).with_steps(steps)
        # the mechanism's own ε: dp_accounting's PLD, pessimistic (an upper bound; the curve the claim is tested
        # against); the accountant's ε: opacus's history of (σ, q, T), its own interface
        return (accountant_epsilon(mech.noise_multiplier, mech.sample_rate, mech.steps, self.spec.delta,
                                   self.spec.accountant),
                mech.epsilon_at(self.spec.delta))

    def claimed_epsilon(self) -> float | None:
        """ε of the claim: what the accountant certifies for the steps taken, raised to the mechanism's own ε
        where the accountant reports less (opacus's ``gdp`` accountant is a central-limit approximation, not an
        upper bound: below the PLD's ε by 0.02-0.87 at ε = 1-8 on the digits head). A claim below its own
        mechanism's curve would be refuted by an honest run; :meth:`claim_correction` says so in one line.
        The target before fitting."""
        if self.n_train is None or self.steps_taken is None:
            return float(self.spec.epsilon)
        return max(self._epsilons(self.n_train, self.steps_taken))

    def claim_correction(self) -> str | None:
        """One line naming both ε and the fix when :meth:`claimed_epsilon` raised the accountant's ε; else None."""
        if self.n_train is None or self.steps_taken is None:
            return None
        acc, own = self._epsilons(self.n_train, self.steps_taken)
        if own <= acc:
            return None
        mech = dp_sgd_mechanism(self.spec, self.n_train)
        return (f"defender {self.name!r}: opacus's {self.spec.accountant} accountant certifies epsilon = {acc:.4g}, but the "
                f"mechanism it calibrated (sigma = {mech.noise_multiplier:.4g}, q = {mech.sample_rate:.4g}, "
                f"T = {self.steps_taken}) has epsilon = {own:.4g} at delta = {self.spec.delta:g} (PLD accountant, an upper "
                f"bound): the claim is corrected to {own:.4g}; set accountant: prv (or rdp) to claim the target "
                f"{self.spec.epsilon:g}")

    def claimed_delta(self) -> float | None:
        return float(self.spec.delta)

    def claimed_mechanism(self) -> Any:
        """The subsampled Gaussian mechanism of the steps taken (``None`` before fitting)."""
        if self.n_train is None or self.steps_taken is None:
            return None
        return dp_sgd_mechanism(self.spec, self.n_train)

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.n_train is not None:
            out.update(noise_multiplier=self.noise_multiplier(self.n_train),
                       sample_rate=self.sample_rate(self.n_train), steps=self.steps_taken,
                       accountant=self.spec.accountant, target_epsilon=self.spec.epsilon)
        return out
