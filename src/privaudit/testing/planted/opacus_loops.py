"""A catalogue of opacus training LOOPS, as users write them, for the white-box audit (issue 27).

:mod:`privaudit.testing.planted.opacus_bugs` plants bugs inside the mechanism (σ, clipping, noise, sampling).
This catalogue varies the *loop around* a correct ``DPOptimizer``: what users legitimately add
(gradient accumulation with ``BatchMemoryManager``, momentum, weight decay, an lr schedule, opacus's
noise and clip schedulers, tiny batches) and what makes the released model not differentially
private although every watched step is (fine-tuning after the DP phase, a second non-private
optimizer, a loop that behaves differently while audited, data-dependent buffers, returning another
model).  Every loop follows the ``kind: python`` protocol ``train(X, y, n_classes, seed, **options)``
and calls ``privaudit.hooks.watch(optimizer, dataset_size=len(X))`` once.

Each :class:`Loop` carries its claim: the ε that opacus's accountant gives for the recipe the loop
*intends* (for the schedules, the heterogeneous composition of the per-epoch σ), so a correct loop
must pass and a faulty one must fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.data_loader import DPDataLoader
from opacus.optimizers import DPOptimizer
from opacus.schedulers import ExponentialNoise
from opacus.schedulers.grad_clip_scheduler import ExponentialGradClip
from opacus.utils.batch_memory_manager import BatchMemoryManager
from torch import nn
from torch.utils.data import TensorDataset

import privaudit.hooks

from privaudit.testing.planted.opacus_bugs import DEFAULTS, LinearHead, recipe

GAMMA = 0.8  # per-epoch decay of the noise / clip schedulers


class InputNorm(nn.Module):
    """A linear head behind a running-mean input normalisation (a buffer updated from the data in
    every training forward, as BatchNorm's running statistics are)."""

    def __init__(self, d: int, n_classes: int, generator: torch.Generator) -> None:
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(d))
        self.linear = nn.utils.skip_init(nn.Linear, d, n_classes)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(self.linear.weight.shape, generator=generator) * 0.01)
            self.linear.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.shape[0] > 0:
            with torch.no_grad():
                self.running_mean.mul_(0.9).add_(x.mean(dim=0), alpha=0.1)
        return self.linear(x - self.running_mean)


def _linear(d: int, n_classes: int, generator: torch.Generator) -> nn.Linear:
    net = nn.utils.skip_init(nn.Linear, d, n_classes)  # no draw from torch's global RNG
    with torch.no_grad():
        net.weight.copy_(torch.randn(net.weight.shape, generator=generator) * 0.01)
        net.bias.zero_()
    return net


def train_loop(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, *, variant: str = "correct",
               **options: Any) -> LinearHead:
    """One opacus DP-SGD loop of the catalogue (``variant``), on a linear head."""
    n = len(X)
    r = recipe(n, **options)
    seeds = np.random.SeedSequence(seed).generate_state(4)
    init_gen, data_gen, noise_gen, _ = (torch.Generator().manual_seed(int(s)) for s in seeds)
    sigma = r["sigma"]
    if variant == "branch_on_recording" and not privaudit.hooks.is_recording():
        sigma = 0.0  # behaves only while audited (the release run is recorded too: it releases the noisy branch)
    if variant == "noiseless":  # no noise at all (the first call of a first_call_loop)
        sigma = 0.0
    model: nn.Module = (InputNorm(X.shape[1], n_classes, init_gen) if variant == "running_stats_buffer"
                        else _linear(X.shape[1], n_classes, init_gen))
    gsm = GradSampleModule(model)
    net = model.linear if isinstance(model, InputNorm) else model
    dp_params = [net.weight] if variant == "bias_second_optimizer" else list(gsm.parameters())
    base = torch.optim.SGD(dp_params, lr=r["lr"], momentum=0.9 if variant == "momentum" else 0.0,
                           weight_decay=1e-3 if variant == "weight_decay" else 0.0)
    opt = DPOptimizer(base, noise_multiplier=sigma, max_grad_norm=r["max_grad_norm"],
                      expected_batch_size=r["batch_size"], generator=noise_gen)
    opt = privaudit.hooks.watch(opt, dataset_size=n)
    bias_opt = torch.optim.SGD([net.bias], lr=r["lr"]) if variant == "bias_second_optimizer" else None
    lr_sched = torch.optim.lr_scheduler.StepLR(base, step_size=1, gamma=0.5) if variant == "steplr" else None
    if variant == "steplr_after_watch":  # the order most code uses: the scheduler wraps the watched opt.step
        lr_sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    if variant == "step_hooks":  # torch's step hooks (on the wrapped optimizer: opacus's DPOptimizer has no hook
        # registry of its own) and a user's own wrapper of the watched opt.step
        base.register_step_pre_hook(lambda o, args, kwargs: None)
        base.register_step_post_hook(lambda o, args, kwargs: None)
        watched_step = opt.step
        opt.step = lambda *args, **kwargs: watched_step(*args, **kwargs)
    # AMP's loss scaling: scaler.step(opt) unscales the summed .grad, then calls the watched opt.step, whose
    # clipping sees the scaled per-sample gradients (each still cut to C, the noise still σ·C: DP holds)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4) if variant == "grad_scaler" else None
    noise_sched = ExponentialNoise(opt, gamma=GAMMA) if variant == "noise_schedule" else None
    clip_sched = ExponentialGradClip(opt, gamma=GAMMA) if variant == "clip_schedule" else None
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    loader = DPDataLoader(TensorDataset(Xt, yt), sample_rate=r["q"], generator=data_gen)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(r["epochs"]):
        if variant == "bmm":
            with BatchMemoryManager(data_loader=loader, max_physical_batch_size=4, optimizer=opt) as mem_loader:
                batches = list(mem_loader)
        else:
            batches = list(loader)
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            if bias_opt is not None:
                bias_opt.zero_grad(set_to_none=True)
            loss = loss_fn(gsm(xb), yb)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                continue
            loss.backward()
            if bias_opt is not None:
                bias_opt.step()  # the bias learns from the batch's mean gradient: no clipping, no noise
                net.bias.grad_sample = None  # not the DP optimizer's: opacus would keep appending
            opt.step()
            if variant == "nudge_between_steps" and len(yb) and int(yb[0]) == 0:
                with torch.no_grad():  # a non-private pull of the weights towards a training row, between DP steps
                    net.weight.add_(xb[:1].expand(net.weight.shape[0], -1), alpha=0.01)
        for sched in (lr_sched, noise_sched, clip_sched):
            if sched is not None:
                sched.step()
    gsm.remove_hooks()
    if variant == "finetune_after_dp":  # a non-private polish on all rows after the DP phase
        plain = torch.optim.SGD(net.parameters(), lr=r["lr"])
        for _ in range(3):
            plain.zero_grad(set_to_none=True)
            loss_fn(net(Xt), yt).backward()
            plain.step()
    if variant == "returned_other_model":  # the DP loop ran for show; a non-private model is released
        other = _linear(X.shape[1], n_classes, torch.Generator().manual_seed(int(seed)))
        plain = torch.optim.SGD(other.parameters(), lr=r["lr"])
        for _ in range(20):
            plain.zero_grad(set_to_none=True)
            loss_fn(other(Xt), yt).backward()
            plain.step()
        return LinearHead(other)
    if isinstance(model, InputNorm):
        return LinearHead(model)  # type: ignore[arg-type]
    return LinearHead(net)


def first_call_loop(first: str, then: str = "correct") -> Callable[..., LinearHead]:
    """A loop that behaves as ``first`` in its FIRST call and as ``then`` in every later one.

    In the pipeline the first call is the release run (the ``defenders`` stage) and the later ones
    are the white-box audit runs: a loop that counts its calls escapes any audit that does not watch
    the release run itself (issue 27). Each call of this factory has its own counter.
    """
    calls = [0]

    def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, **options: Any) -> LinearHead:
        calls[0] += 1
        return train_loop(X, y, n_classes, seed, variant=first if calls[0] == 1 else then, **options)

    train.__name__ = train.__qualname__ = f"train_{first}_first_then_{then}"
    return train


def claimed_epsilon(variant: str, n: int, **options: Any) -> float:
    """The ε the loop's author claims: opacus's accountant on the intended recipe's history."""
    from opacus.accountants import create_accountant

    r = recipe(n, **options)
    acc = create_accountant(mechanism=r["accountant"])
    if variant == "noise_schedule":  # σ_e = σ·γ^e at epoch e (the scheduler steps after each epoch)
        acc.history = [(r["sigma"] * GAMMA ** e, r["q"], r["steps_per_epoch"]) for e in range(r["epochs"])]
    else:  # the clip schedule scales the noise with C: the same noise multiplier every step
        acc.history = [(r["sigma"], r["q"], r["steps"])]
    return float(acc.get_epsilon(delta=r["delta"]))


@dataclass(frozen=True)
class Loop:
    """A loop of the catalogue; ``honest`` loops must pass the white-box audit, the others fail it."""

    variant: str
    description: str
    honest: bool
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def train(self) -> Callable[..., LinearHead]:
        variant, opts = self.variant, dict(self.options)

        def train(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, **options: Any) -> LinearHead:
            return train_loop(X, y, n_classes, seed, variant=variant, **{**opts, **options})

        train.__name__ = train.__qualname__ = f"train_{variant}"
        return train

    def claim(self, n: int) -> float:
        return claimed_epsilon(self.variant, n, **dict(self.options))


LOOPS: dict[str, Loop] = {lp.variant: lp for lp in (
    Loop("correct", "the intended recipe (DPDataLoader, DPOptimizer, plain SGD)", True),
    Loop("bmm", "BatchMemoryManager, physical batches of 4 (virtual steps)", True),
    Loop("momentum", "SGD with momentum 0.9 after the noise", True),
    Loop("weight_decay", "SGD with weight decay 1e-3", True),
    Loop("steplr", "StepLR halving the lr every epoch", True),
    Loop("steplr_after_watch", "StepLR on the DPOptimizer, created after privaudit.hooks.watch", True),
    Loop("step_hooks", "torch step pre/post hooks on the wrapped SGD and a user's wrapper of the watched step", True),
    Loop("grad_scaler", "AMP's GradScaler (loss scaling; scaler.step calls the watched opt.step)", True),
    Loop("noise_schedule", f"opacus ExponentialNoise, σ × {GAMMA} per epoch, claim on the σ history", True),
    Loop("clip_schedule", f"opacus ExponentialGradClip, C × {GAMMA} per epoch", True),
    Loop("batch2", "expected batch size 2 (many empty Poisson batches)", True, (("batch_size", 2), ("epochs", 2))),
    Loop("finetune_after_dp", "3 non-private full-batch SGD steps after the DP phase", False),
    Loop("bias_second_optimizer", "the bias trained by a second, non-private optimizer", False),
    Loop("nudge_between_steps", "the weights pulled towards a training row between DP steps (when its label is 0)",
         False),
    # caught since the release run is recorded too (issue 27), by the pooled release run only
    Loop("branch_on_recording", "no noise unless privaudit.hooks.is_recording()", False),
    Loop("running_stats_buffer", "a running-mean input buffer updated from the training data", False),
    Loop("returned_other_model", "the DP loop runs, a non-private model is returned", False),
)}

__all__ = ["LOOPS", "Loop", "train_loop", "first_call_loop", "claimed_epsilon", "InputNorm", "GAMMA", "DEFAULTS"]
