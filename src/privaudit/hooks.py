"""Observe opacus's ``DPOptimizer`` while it trains: the white-box audit's one-line hook.

In a training loop (privaudit's ``dp_sgd`` defender, or a user's ``kind: python`` trainer)::

    optimizer = DPOptimizer(...)            # or PrivacyEngine().make_private(...)
    optimizer = privaudit.hooks.watch(optimizer, dataset_size=len(X))

Outside an active :func:`recording` ``watch`` returns the optimizer untouched (one context-variable
read; no attribute is set, no random number drawn).  Inside a recording (an audit run, see
:func:`privaudit.audits.whitebox.whitebox_audit`, and the release run of every observable defender
in the ``defenders`` stage, :mod:`privaudit.defenders.release_watch`) it
wraps the instance's own ``clip_and_accumulate`` and ``add_noise`` (opacus's ``pre_step`` calls
clip_and_accumulate → _check_skip_next_step → add_noise → scale_grad), so whatever those methods
do — opacus's code, a subclass, a bug — is what gets measured.  The hook never samples, clips,
adds noise or accounts by itself.  Per step it records (:class:`~privaudit.stats.observations.RunObservations`):

* ``B_t``: rows of the first parameter's ``grad_sample`` (summed over virtual steps when opacus
  accumulates and skips steps, e.g. ``BatchMemoryManager``);
* ``Δ_t``: once per step, a gradient canary row ``g_c = M·C·u`` (``u`` a fresh uniformly random
  unit vector over all trainable parameters, from the recording's own seeded generator; ``M`` =
  ``canary_scale``, ``C`` = ``optimizer.max_grad_norm``) is appended to every parameter's
  ``grad_sample``.  The ORIGINAL ``clip_and_accumulate`` runs once on the data alone (its sum is
  copied, then ``summed_grad`` is restored) and once on data + canary (kept for the real step);
  ``Δ_t = ‖S_with − S_data‖₂`` (= C when clipping works, M·C when it is skipped).  The canary is
  a *shadow*: the step goes on with the data-only sum, so a watched run releases the same bits as
  an unwatched one (``tests/whitebox/test_release_watch.py``) and the release run itself can be
  watched;
* ``N_t = p.grad − p.summed_grad`` after the ORIGINAL ``add_noise``, over all d coordinates
  (kept as ``‖N_t‖²``, ``Σ N_tj⁴``, ``cos(N_{t−1}, N_t)`` and ``Σ_t N_tj²``; O(d) memory), and the
  optimizer's declared noise std ``σ_t·C_t`` at that step (schedulers change it);
* what reaches the released model: the watched parameters right after every watched step (the
  instance's ``step`` is wrapped too) and, through a global forward pre-hook, every parameter and
  buffer as a training forward pass first used it. :meth:`Recording.release_changes` lists
  whatever changed outside a watched step (O(d) memory for the copies).

Everything a step records stays on the parameters' device until :meth:`Recording.observations` (or
:attr:`Recording.changes`) reads it, once: on a GPU a value read back every step synchronised every step (issue
43: a watched opacus step of the default ``dp_sgd`` head took 3.8 ms on an H200 against 2.35 ms unwatched). The
cosine and Δ_t's square root are formed there, on the host, as IEEE float64 (the numbers of the per-step Python
floats before, bit for bit; torch's ``sqrt`` of a 0-d float64 CPU tensor differed from ``math.sqrt`` in the last
bit for 1.4 % of 20 000 random values here). Noise that is not finite is refused
then, not in the step.

Not observed: steps that bypass the optimizer (a loop that adds noise by hand on an empty Poisson
batch; ``dp_sgd`` routes empty batches through the optimizer, observed as B_t = 0; an unobserved
step only lowers ε̂); inside the step, what comes after ``add_noise`` (``scale_grad``, the
base optimizer's update: momentum, weight decay, the lr) is taken as post-processing; a tensor set
from the data *before* the recording's first forward pass (e.g. a normalisation computed up front)
is indistinguishable from a constant.  Ghost clipping (``DPOptimizerFastGradientClipping``) has no
per-example rows and is refused.  The ``grad_sample`` tensors the user's code sees after the step
are the original ones (marked processed, as opacus marks them).
"""

from __future__ import annotations

import math
import time
import types
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, TypeVar

import numpy as np

from privaudit.stats.observations import RunObservations

__all__ = ["watch", "recording", "Recording", "is_recording", "WatchNotCalledError"]

_O = TypeVar("_O")
_ACTIVE: ContextVar["Recording | None"] = ContextVar("privaudit_hooks_recording", default=None)
_MARK = "_privaudit_watched_by"


class WatchNotCalledError(ValueError):
    """The trainer never handed a DPOptimizer to :func:`watch` during an audit run."""


def is_recording() -> bool:
    """True inside an active :func:`recording` (in this context/thread).

    Not a way to tell an audit from the release: the ``defenders`` stage trains every observable
    defender inside a recording too (:mod:`privaudit.defenders.release_watch`), so this is true in
    the release run as well, and a loop that adds noise only when it is true releases its noisy
    branch, which the white-box audit measures (``tests/whitebox/test_release_run.py``).
    """
    return _ACTIVE.get() is not None


def watch(optimizer: _O, *, dataset_size: int) -> _O:
    """Hand ``optimizer`` (an opacus ``DPOptimizer``) to the active audit recording, if any.

    Args:
        optimizer: the ``DPOptimizer`` (or subclass) the training loop steps.
        dataset_size: the number of training rows (recorded as declared; the audit uses the
            size it passed to the trainer).

    Returns:
        ``optimizer`` itself.  Outside a recording nothing else happens.

    Raises:
        ValueError: inside a recording only — ``optimizer`` is not an opacus ``DPOptimizer``, uses
            ghost clipping, has no trainable parameters, or ``dataset_size`` is not a positive int.
    """
    rec = _ACTIVE.get()
    if rec is None:
        return optimizer
    rec._attach(optimizer, dataset_size)
    return optimizer


class _Pending:
    """The logical step being assembled (opacus may call clip_and_accumulate several times)."""

    __slots__ = ("rows", "sensitivity")

    def __init__(self) -> None:
        self.rows = 0
        self.sensitivity: Any = None  # Δ_t² as a 0-d float64 tensor on the parameters' device (NaN: not measurable)


class Recording:
    """Observations of ONE training run (all optimizers watched while it is open).

    Created by :func:`recording`; read :meth:`observations` after the run.
    """

    def __init__(self, *, seed: int, canary_scale: float = 4.0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        scale = float(canary_scale)
        if not (math.isfinite(scale) and scale > 1.0):
            raise ValueError(f"canary_scale must be a finite number > 1 (so that an unclipped canary, norm M·C, "
                             f"differs from a clipped one, norm C), got {canary_scale!r}")
        self.seed = int(seed)
        self.canary_scale = scale
        self.open = False
        self.optimizers = 0
        self.declared_dataset_sizes: list[int] = []
        self.declared_noise_multiplier: float | None = None
        self.declared_max_grad_norm: float | None = None
        self.unmeasured_steps = 0
        self._gen: Any = None
        self._d: int | None = None
        # per step, as 0-d float64 tensors on the parameters' device (read to the host once, in observations():
        # no host sync per step on a GPU, where each one made the watched opacus step ~60 % slower than an unwatched one)
        self._rows: list[int] = []
        self._sens_sq: list[Any] = []  # Δ_t² (its square root is taken on the host, as math.sqrt took it)
        self._sq: list[Any] = []
        self._quart: list[Any] = []
        self._dot: list[Any] = []  # N_t · N_{t−1} (NaN for the first step); the cosine is formed on the host
        self._finite: Any = None  # 0-d bool tensor: every step's noise was finite
        self._nan: Any = None  # 0-d float64 NaN on the device
        self._coord: Any = None  # float64 torch tensor (d,)
        self._coord_scaled: Any = None  # Σ_t (N_t / (σ_t C_t))², float64 (d,); None once a scale is 0
        self._scale: list[float] = []  # declared σ_t·C_t per step
        self._prev: Any = None  # previous step's noise (float64, d)
        self._pending: _Pending | None = None
        # what reaches the released model (issue 27): the watched parameters right after every
        # watched step, and every tensor a training forward pass used, as first seen
        self._owned: list[Any] = []  # the watched optimizers' parameters
        self._after: list[Any] = []  # their values after the last watched step (or at watch time)
        self._seen: dict[int, tuple[str, Any, Any]] = {}  # id → (label, tensor, value when first used)
        self._changes: list[str] = []  # changes outside a watched DP step, in the order they were seen
        # per watched parameter, on its device: the first watched step before which it had changed (-1: none) and
        # how many steps that happened before; turned into lines of ``changes`` when they are read
        self._moved: list[tuple[Any, Any]] = []
        self._forward_hook: Any = None
        #: seconds the recording itself spent in the run (the canary pass, the noise read, the checks of what
        #: changed): what an unwatched run of the same loop does not pay (the plan prices the one-run audit's
        #: unwatched run from a watched release fit with it); a measurement, never part of an observation
        self.observing_seconds = 0.0

    # -- public -------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        """Steps observed so far."""
        return len(self._rows)

    def observations(self) -> RunObservations:
        """The run's observations.

        Raises:
            WatchNotCalledError: no optimizer was watched.
            ValueError: an optimizer was watched but never stepped.
        """
        if self.optimizers == 0:
            raise WatchNotCalledError("no optimizer was handed to privaudit.hooks.watch during this recording")
        if not self._rows:
            raise ValueError("the watched DPOptimizer never added noise (no optimizer.step() reached add_noise)")
        import torch

        if not bool(self._finite):
            raise ValueError("privaudit.hooks: the optimizer's noise (p.grad - p.summed_grad) is not finite "
                             "after add_noise in some step; cannot audit this run")
        sens_sq, sq, quart, dot = (torch.stack(x).cpu().numpy() for x in (self._sens_sq, self._sq, self._quart,
                                                                           self._dot))
        cos = np.full(len(sq), np.nan)
        both = (sq[1:] > 0) & (sq[:-1] > 0)  # as IEEE float64 on the host: Python's math.sqrt and division
        cos[1:][both] = np.clip(dot[1:][both] / np.sqrt(sq[1:][both] * sq[:-1][both]), -1.0, 1.0)
        return RunObservations(
            batch_rows=np.asarray(self._rows, dtype=np.int64), sensitivity=np.sqrt(sens_sq),
            noise_sq=sq, noise_quartic=quart, noise_cos=cos,
            coord_sq=self._coord.cpu().numpy().copy(),
            noise_scale=(np.asarray(self._scale, dtype=np.float64)
                         if len(self._scale) == len(self._rows) and all(math.isfinite(r) for r in self._scale)
                         else None),
            coord_sq_scaled=None if self._coord_scaled is None else self._coord_scaled.cpu().numpy().copy(),
            declared_dataset_size=self.declared_dataset_sizes[0] if self.declared_dataset_sizes else None,
            declared_noise_multiplier=self.declared_noise_multiplier,
            declared_max_grad_norm=self.declared_max_grad_norm)

    # -- attaching ----------------------------------------------------------------------------
    def _attach(self, opt: Any, dataset_size: Any) -> None:
        import torch
        from opacus.optimizers import DPOptimizer

        try:
            from opacus.optimizers import DPOptimizerFastGradientClipping as _Ghost
        except ImportError:  # pragma: no cover - older opacus
            _Ghost = ()  # type: ignore[assignment,misc]
        if not isinstance(opt, DPOptimizer):
            raise ValueError(f"privaudit.hooks.watch needs an opacus DPOptimizer (or subclass), got "
                             f"{type(opt).__name__}; wrap the optimizer with opacus (DPOptimizer / PrivacyEngine)")
        if _Ghost and isinstance(opt, _Ghost):
            raise ValueError("privaudit.hooks.watch cannot observe ghost clipping (DPOptimizerFastGradientClipping: "
                             "no per-example gradient rows); use grad_sample_mode='hooks' for the audit")
        if isinstance(dataset_size, bool) or not isinstance(dataset_size, (int, np.integer)) or dataset_size < 1:
            raise ValueError(f"dataset_size must be the number of training rows (an int >= 1), got {dataset_size!r}")
        if getattr(opt, _MARK, None) is self:
            return  # already watched by this recording
        params = list(opt.params)
        if not params:
            raise ValueError("the DPOptimizer has no trainable parameters")
        d = int(sum(p.numel() for p in params))
        if self._d is None:
            dev = params[0].device
            self._d = d
            self._coord = torch.zeros(d, dtype=torch.float64, device=dev)
            self._coord_scaled = torch.zeros(d, dtype=torch.float64, device=dev)
            self._finite = torch.ones((), dtype=torch.bool, device=dev)
            self._nan = torch.full((), math.nan, dtype=torch.float64, device=dev)
            self._gen = torch.Generator().manual_seed(self.seed)  # the canaries are drawn on the CPU, on any device
        elif d != self._d:
            raise ValueError(f"all optimizers watched in one run must train the same parameters: {d} != {self._d}")
        self.optimizers += 1
        self.declared_dataset_sizes.append(int(dataset_size))
        if self.declared_noise_multiplier is None:
            nm = getattr(opt, "noise_multiplier", None)
            self.declared_noise_multiplier = float(nm) if isinstance(nm, (int, float)) else None
            self.declared_max_grad_norm = float(opt.max_grad_norm)
        orig_clip = opt.clip_and_accumulate
        orig_noise = opt.add_noise
        orig_step = opt.step
        rec = self
        self._owned.extend(params)
        self._after.extend(p.detach().clone() for p in params)
        self._moved.extend((torch.full((), -1, dtype=torch.int64, device=p.device),
                            torch.zeros((), dtype=torch.int64, device=p.device)) for p in params)

        def clip_and_accumulate(_self: Any) -> None:
            if not rec.open:
                return orig_clip()
            data_pass: list[float] = []

            def clip_once() -> Any:  # the first pass is the work an unwatched step does too: not observing
                if data_pass:
                    return orig_clip()
                t = time.perf_counter()
                try:
                    return orig_clip()
                finally:
                    data_pass.append(time.perf_counter() - t)

            try:
                with rec._observing():
                    rec._clip(opt, clip_once)
            finally:
                rec.observing_seconds -= sum(data_pass)
            return None

        def add_noise(_self: Any) -> None:
            if not rec.open:
                return orig_noise()
            orig_noise()
            with rec._observing():
                rec._noise(opt)
            return None

        def step(_self: Any, *args: Any, **kwargs: Any) -> Any:
            if not rec.open:
                return orig_step(*args, **kwargs)
            with rec._observing():
                rec._check_before_step(rec.steps)
            out = orig_step(*args, **kwargs)
            with rec._observing():
                rec._snapshot()
            return out

        # bound methods, as the optimizer's own are: whatever wraps them afterwards (torch's LR schedulers
        # read ``opt.step.__func__`` and rebind it; AMP's GradScaler and step hooks call them) sees the
        # shape it expects (issue 34: a StepLR created after watch crashed on a plain function)
        opt.clip_and_accumulate = types.MethodType(clip_and_accumulate, opt)
        opt.add_noise = types.MethodType(add_noise, opt)
        opt.step = types.MethodType(step, opt)
        setattr(opt, _MARK, self)

    # -- what reaches the released model ------------------------------------------------------
    def _snapshot(self) -> None:
        for p, a in zip(self._owned, self._after):
            a.copy_(p.detach())

    def _label(self, i: int) -> str:
        p = self._owned[i]
        return self._seen.get(id(p), (f"watched parameter {i} {tuple(p.shape)}",))[0]

    def _check_unchanged(self, when: str) -> None:
        import torch

        for i, (p, a) in enumerate(zip(self._owned, self._after)):
            if not torch.equal(p.detach(), a):
                self._changes.append(f"{self._label(i)} changed outside a watched DP step ({when})")
                a.copy_(p.detach())  # report each change once

    def _check_before_step(self, step: int) -> None:
        """Before watched step ``step``: which watched parameters changed since the last one, kept on their device
        (the first such step and how many; :attr:`changes` reads them). No host read: on a GPU a comparison read
        back every step synchronised every step. The step's snapshot (:meth:`_snapshot`) resets the comparison."""
        import torch

        for i, (p, a, (first, count)) in enumerate(zip(self._owned, self._after, self._moved)):
            if p.shape != a.shape:  # replaced by a tensor of another shape: known here, reported as before
                self._check_unchanged(f"before watched step {step}")
                continue
            moved = torch.ne(p.detach(), a).any()
            first.copy_(torch.where(moved & (first < 0), step, first))
            count.add_(moved)

    @property
    def changes(self) -> list[str]:
        """What changed outside a watched DP step, in the order it was seen (a new list): a watched parameter that
        changed before a watched step (one line per parameter: the first such step and how many more), then what
        :meth:`release_changes` found after the last one."""
        lines = []
        for i, (first, count) in enumerate(self._moved):
            f, c = int(first), int(count)
            if c:
                more = f" and before {c - 1} later watched step{'s' if c > 2 else ''}" if c > 1 else ""
                lines.append((f, i, f"{self._label(i)} changed outside a watched DP step (before watched step {f}{more})"))
        return [line for _, _, line in sorted(lines)] + list(self._changes)

    @contextmanager
    def _observing(self) -> Iterator[None]:
        """Count the block's seconds as observing (``observing_seconds``: what watching adds to a run)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.observing_seconds += time.perf_counter() - start

    def _on_forward(self, module: Any, _inputs: Any) -> None:
        """Global forward pre-hook: remember every parameter and buffer as first used in training."""
        with self._observing():
            self._remember(module)

    def _remember(self, module: Any) -> None:
        for kind, named in (("parameter", module.named_parameters(recurse=False)),
                            ("buffer", module.named_buffers(recurse=False))):
            for name, t in named:
                if t is not None and id(t) not in self._seen:
                    self._seen[id(t)] = (f"{kind} {type(module).__name__}.{name} {tuple(t.shape)}", t,
                                         t.detach().clone())

    def _start(self) -> None:
        import torch

        self._forward_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._on_forward)

    def _stop(self) -> None:
        if self._forward_hook is not None:
            self._forward_hook.remove()
            self._forward_hook = None

    def release_changes(self, model: Any) -> list[str]:
        """What reached ``model`` (the trainer's return value) outside the watched DP steps.

        Every parameter and buffer of ``model`` (an ``nn.Module``, or an object holding one as an
        attribute, e.g. ``self.net``) must be either a watched parameter, equal to its value
        right after the last watched step, or a tensor that training used and that never changed
        (a frozen layer, a constant buffer).  Listed, each with its name and when it changed:
        updates between or after watched steps (fine-tuning, a second optimizer), parameters the
        watched optimizer does not own that changed, buffers updated from data in training
        forward passes (running statistics), and tensors no training forward used (the returned
        model is not the one trained).  A model that exposes no torch tensor is listed too.
        """
        import torch

        self._check_unchanged("after the last watched step")
        out = self.changes
        owned = {id(p): i for i, p in enumerate(self._owned)}
        tensors = _model_tensors(model)
        if not tensors:
            return out + [f"the returned {type(model).__name__} exposes no torch parameters (an nn.Module or an "
                          "attribute holding one): the white-box audit cannot see what was released"]
        for name, t in tensors:
            if id(t) in owned:
                continue  # compared with the post-step value above
            seen = self._seen.get(id(t))
            if seen is None:
                out.append(f"{name} {tuple(t.shape)} of the returned model was not used by any training forward "
                           "pass: the returned model is not the one the watched optimizer trained")
            elif not torch.equal(t.detach(), seen[2]):
                out.append(f"{name} ({seen[0]}) changed during training but is not trained by the watched "
                           "DPOptimizer (a second optimizer, or a buffer computed from the data)")
        return out

    # -- per step -----------------------------------------------------------------------------
    def _clip(self, opt: Any, orig_clip: Any) -> None:
        import torch

        try:
            from opacus.optimizers.optimizer import _mark_as_processed
        except ImportError:  # pragma: no cover
            def _mark_as_processed(obj: Any) -> None:
                for x in obj if isinstance(obj, list) else [obj]:
                    x._processed = True

        params = list(opt.params)
        if self._pending is None:
            self._pending = _Pending()
        pend = self._pending
        gs = [p.grad_sample for p in params]
        if gs[0] is None:
            return orig_clip()  # opacus raises its own error
        first = gs[0] if isinstance(gs[0], torch.Tensor) else torch.cat(list(gs[0]), dim=0)
        pend.rows += int(first.shape[0])
        if pend.sensitivity is not None:  # canary already inserted in this logical step
            return orig_clip()
        prev = [None if p.summed_grad is None else p.summed_grad.detach().clone() for p in params]
        # data-only pass on views, so opacus's "processed" marks land on the views
        for p, g in zip(params, gs):
            p.grad_sample = g.view_as(g) if isinstance(g, torch.Tensor) else [x.view_as(x) for x in g]
        orig_clip()
        kept = [p.summed_grad for p in params]  # the data-only sum: what the step uses, untouched below
        s_data = [None if p.summed_grad is None else p.summed_grad.detach().to(torch.float64).clone() for p in params]
        # data + canary pass on a copy (a shadow): measured, then dropped, so the canary never trains
        C = float(opt.max_grad_norm)
        u = torch.randn(self._d, generator=self._gen, dtype=torch.float64)
        u = (u * (self.canary_scale * C / torch.linalg.vector_norm(u))).to(self._coord.device)  # one copy a step
        off = 0
        for p, g, s in zip(params, gs, prev):
            k = p.numel()
            row = u[off:off + k].reshape((1, *p.shape))
            off += k
            if isinstance(g, torch.Tensor):
                p.grad_sample = torch.cat([g, row.to(dtype=g.dtype, device=g.device)], dim=0)
            else:
                last = g[-1]
                p.grad_sample = [x.view_as(x) for x in g[:-1]] + [
                    torch.cat([last, row.to(dtype=last.dtype, device=last.device)], dim=0)]
            p.summed_grad = None if s is None else s.clone()
        orig_clip()
        sq = None  # Σ over parameters of ‖S_with − S_data‖², a float64 0-d tensor on the device (no host read)
        for p, sd in zip(params, s_data):
            if p.summed_grad is None or sd is None:
                sq = None
                break
            term = torch.sum((p.summed_grad.detach().to(torch.float64) - sd) ** 2)
            sq = term if sq is None else sq + term
        pend.sensitivity = sq if sq is not None else self._nan  # Δ_t², rooted in observations()
        for p, g, k in zip(params, gs, kept):  # the user's code sees its own grad_sample, processed
            p.grad_sample = g
            p.summed_grad = k  # the step goes on with the data-only sum, bit for bit an unwatched one
            _mark_as_processed(g)
        return None

    def _noise(self, opt: Any) -> None:
        import torch

        params = list(opt.params)
        pend = self._pending or _Pending()
        self._pending = None
        parts = []
        for p in params:
            if p.grad is None or p.summed_grad is None:
                parts.append(torch.full((p.numel(),), math.nan, dtype=torch.float64, device=self._coord.device))
            else:
                parts.append(p.grad.detach().to(torch.float64).reshape(-1) - p.summed_grad.detach().to(
                    torch.float64).reshape(-1))
        n = torch.cat(parts).to(self._coord.device)
        # a non-finite step is refused in observations() (read once there, not per step)
        self._finite = self._finite & torch.isfinite(n).all()
        sq = n @ n
        if pend.sensitivity is None:
            self.unmeasured_steps += 1
        self._rows.append(pend.rows)
        self._sens_sq.append(self._nan if pend.sensitivity is None else pend.sensitivity)
        self._sq.append(sq)
        self._quart.append(torch.sum(n ** 4))
        self._dot.append(self._nan if self._prev is None else n @ self._prev[0])
        self._prev = (n, sq)
        self._coord += n * n
        nm, C = getattr(opt, "noise_multiplier", None), getattr(opt, "max_grad_norm", None)
        if isinstance(nm, (int, float)) and isinstance(C, (int, float)) and math.isfinite(nm * C) and nm * C >= 0:
            r = float(nm) * float(C)
            self._scale.append(r)
            if self._coord_scaled is not None:
                if r > 0:
                    self._coord_scaled += (n / r) ** 2
                else:
                    self._coord_scaled = None
        else:  # a subclass without the attributes: no declared shape
            self._scale.append(math.nan)
            self._coord_scaled = None


def _model_tensors(model: Any, _depth: int = 0) -> list[tuple[str, Any]]:
    """(name, tensor) of every parameter and buffer of ``model`` or of the ``nn.Module`` attributes it holds."""
    from torch import nn

    if isinstance(model, nn.Module):
        return [*model.named_parameters(), *model.named_buffers()]
    if _depth >= 2 or not hasattr(model, "__dict__"):
        return []
    out: list[tuple[str, Any]] = []
    for attr, value in vars(model).items():
        for name, t in _model_tensors(value, _depth + 1):
            out.append((f"{attr}.{name}", t))
    return out


@contextmanager
def recording(*, seed: int, canary_scale: float = 4.0) -> Iterator[Recording]:
    """Record every optimizer :func:`watch` receives while the block runs (one training run).

    Args:
        seed: seeds the canary directions (a private ``torch.Generator``; no global RNG is used
            and the trainer's own generators are untouched).
        canary_scale: M in the canary ``M·C·u``; must be > 1.

    Raises:
        ValueError: bad arguments, or a recording is already active in this context.
    """
    if _ACTIVE.get() is not None:
        raise ValueError("a privaudit.hooks.recording is already active; recordings do not nest")
    rec = Recording(seed=seed, canary_scale=canary_scale)
    token = _ACTIVE.set(rec)
    rec.open = True
    rec._start()
    try:
        yield rec
    finally:
        rec._stop()
        rec.open = False
        _ACTIVE.reset(token)
