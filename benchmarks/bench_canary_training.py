"""Benchmark: training many DP-SGD heads — a sequential opacus loop vs privaudit's batched trainer.

The same work both ways: M DP-SGD linear heads (the ``kind: dp_sgd`` recipe: Poisson rate
q = batch_size / n, per-example clipping to C, Gaussian noise σ from opacus's accountant, plain
SGD), each on the shared training set.

* sequential: the way a user writes it — per model a fresh ``nn.Linear``, ``SGD`` optimizer and
  ``opacus.PrivacyEngine().make_private(..., poisson_sampling=True)`` over a ``DataLoader``;
  timed on ``--seq-models`` models (and ``--seq-epochs`` epochs, scaled to ``--epochs``: the
  per-epoch cost is constant) and reported as models/s (the per-model cost is constant);
* batched: :func:`privaudit.train.train_heads` on all M models at once (per-example gradient norms
  by the ghost-norm identity, no per-sample gradients materialised). With ``--gpu`` it is timed twice,
  side by side: the eager steps (``formulation="gather"``, today's path before issue 43: ~60 kernel
  launches and 3 host syncs per step) and ``auto`` (fixed-shape steps replayed as CUDA graphs,
  :mod:`privaudit.train.static_steps`), with the ratio and whether both drew the same random numbers;
  then, where triton imports, the opt-in ``formulation="triton"`` (the same graphs with the clipped sum
  of linear heads as one Triton kernel, :mod:`privaudit.train.fused_triton`).

CPU (default): 256 heads on digits (900 training rows × 64 features, 10 classes), 20 epochs.
``--gpu``: 1000 heads on CIFAR-size features (50 000 × 512 random, 10 classes) on CUDA, 20 epochs
(issue 17's target: the batched trainer under 60 s, ≥ 100× the sequential loop on the same GPU;
issue 43's: under 2 s on an H200, from 16.1 s). ``--dry-run``: the ``--gpu`` comparison shrunk to run
in seconds on the CPU (2 000 rows, 16 heads, 2 epochs; ``static`` steps without graphs in place of
``auto``), to check the script without a GPU.

Run:  nice python benchmarks/bench_canary_training.py [--models 256] [--seq-models 8] [--epochs 20] [--out FILE]
      python benchmarks/bench_canary_training.py --gpu [--models 1000] [--seq-models 3] [--epochs 20] [--seq-epochs 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from opacus import PrivacyEngine
from opacus.accountants.utils import get_noise_multiplier
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from privaudit.train import DPSettings, HeadRecipe, TrainData, predict_proba, train_heads


def _data(gpu: bool, seed: int = 0, n: int = 50_000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if gpu:
        rng = np.random.default_rng(seed)
        centers = rng.standard_normal((10, 512)).astype(np.float32)
        y = rng.integers(0, 10, n + 5_000)
        X = (centers[y] * 0.3 + rng.standard_normal((n + 5_000, 512)).astype(np.float32))
        return X[:n], y[:n], X[n:], y[n:]
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return X[:900], y[:900], X[900:], y[900:]


def sequential(X: np.ndarray, y: np.ndarray, Xte: np.ndarray, yte: np.ndarray, models: int, epochs: int,
               batch_size: int, sigma: float, C: float, lr: float, device: str) -> tuple[float, float]:
    """Seconds per model and mean test accuracy of a plain opacus loop (one PrivacyEngine per model)."""
    ds = TensorDataset(torch.tensor(X), torch.tensor(y))
    Xt, yt = torch.tensor(Xte, device=device), torch.tensor(yte, device=device)
    accs = []
    t0 = time.perf_counter()
    for s in range(models):
        torch.manual_seed(s)  # the user's way; the library itself never seeds globally
        model = nn.Linear(X.shape[1], 10).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        loader = DataLoader(ds, batch_size=batch_size, shuffle=True)
        engine = PrivacyEngine(accountant="prv")
        model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                                 noise_multiplier=sigma, max_grad_norm=C, poisson_sampling=True)
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
        with torch.no_grad():
            accs.append(float((model(Xt).argmax(1) == yt).float().mean()))
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / models, float(np.mean(accs))


def batched(X: np.ndarray, y: np.ndarray, Xte: np.ndarray, yte: np.ndarray, models: int, epochs: int,
            batch_size: int, sigma: float, C: float, lr: float, device: str, formulation: str = "auto",
            state: list | None = None, canary_rows: bool = False) -> tuple[float, float]:
    """Seconds per model and mean test accuracy of :func:`train_heads` on all models at once
    (``state``: the generator's final state is appended to it). ``canary_rows``: every model has one extra row
    (a test row as its input canary), in the data sets of every other model — the black-box audit's trials."""
    q = batch_size / len(y)
    recipe = HeadRecipe(hidden=(), epochs=epochs, batch_size=batch_size, lr=lr,
                        dp=DPSettings(sigma, C, q, epochs * max(1, round(1 / q)), float(batch_size)))
    data = TrainData(torch.tensor(X, device=device), torch.tensor(y, device=device), n_models=models)
    if canary_rows:
        data.X_extra = torch.tensor(Xte[:1], device=device).expand(models, 1, -1).contiguous()
        data.y_extra = torch.tensor(yte[:1], device=device).expand(models, 1).contiguous()
        data.extra_valid = (torch.arange(models, device=device) % 2 == 0).unsqueeze(1)
    gen = torch.Generator(device=device).manual_seed(0)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    heads = train_heads(recipe, data, 10, gen, formulation=formulation)
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if state is not None:
        state.append(gen.get_state())
    acc = (predict_proba(heads, torch.tensor(Xte, device=device)).argmax(2) == torch.tensor(yte, device=device))
    return dt / models, float(acc.double().mean())


def kernel_profile(X: np.ndarray, y: np.ndarray, Xte: np.ndarray, yte: np.ndarray, models: int, batch_size: int,
                   sigma: float, C: float, lr: float, out: Path | None) -> list[str]:
    """One epoch of ``models`` DP-SGD linear heads with ``formulation="static"`` (the kernels a CUDA graph
    replays, launched one by one so that the profiler sees each) under :mod:`torch.profiler`: the table of
    CUDA kernels by their own device time, and the device time per step against the wall per step of the
    same epoch replayed as CUDA graphs (``auto``). Where the two are close the graph is bound by its
    kernels' own time, not by launches, and only fewer or faster kernels make it faster."""
    from torch.profiler import ProfilerActivity, profile

    steps = max(1, round(len(y) / batch_size))
    batched(X, y, Xte, yte, models, 1, batch_size, sigma, C, lr, "cuda", "static")  # warm-up
    s_auto, _ = batched(X, y, Xte, yte, models, 1, batch_size, sigma, C, lr, "cuda", "auto")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        batched(X, y, Xte, yte, models, 1, batch_size, sigma, C, lr, "cuda", "static")
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    launches = sum(e.count for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    lines = [f"kernel profile: {models} DP-SGD linear heads, 1 epoch = {steps} steps, formulation='static' under "
             f"torch.profiler",
             f"device time of all CUDA kernels: {kernel_us / 1e3:.1f} ms = {kernel_us / steps:.1f} us per step, "
             f"{launches / steps:.1f} kernels per step; the same epoch as CUDA graphs ('auto', no profiler): "
             f"{s_auto * models * 1e3:.1f} ms = {s_auto * models * 1e6 / steps:.1f} us per step",
             events.table(sort_by="self_device_time_total", row_limit=30)]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="1000 heads on 50k x 512 features on CUDA")
    ap.add_argument("--dry-run", action="store_true", help="the --gpu comparison shrunk, on the CPU (checks the script)")
    ap.add_argument("--models", type=int, default=None)
    ap.add_argument("--seq-models", type=int, default=None, help="models timed in the sequential loop")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--seq-epochs", type=int, default=None,
                    help="epochs the sequential loop is timed on, its time scaled to --epochs (per-epoch cost is "
                         "constant: same steps, same sizes); default --epochs on the CPU, 2 with --gpu, where 20 "
                         "epochs of the opacus loop take minutes per model")
    ap.add_argument("--epsilon", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    ap.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    ap.add_argument("--no-sequential", action="store_true",
                    help="skip the sequential opacus loop (its ratio is in earlier results; saves ~20 s on a GPU)")
    ap.add_argument("--no-triton", action="store_true", help="with --gpu: skip the opt-in fused Triton row")
    ap.add_argument("--canary-rows", action="store_true",
                    help="every model one extra row (an input canary, in every other model's data set), as the "
                         "black-box audit's trials train; implies --no-triton and --no-sequential")
    ap.add_argument("--kernel-profile", type=Path, default=None,
                    help="with --gpu: also profile one epoch of the static steps (torch.profiler) and write the CUDA "
                         "kernels by device time to this file")
    args = ap.parse_args()
    if args.canary_rows:
        args.no_triton = args.no_sequential = True
    warnings.filterwarnings("ignore")
    device = "cuda" if args.gpu else "cpu"
    side_by_side = args.gpu or args.dry_run
    if args.gpu and not torch.cuda.is_available():
        raise SystemExit("--gpu needs CUDA; none is available here")
    if args.threads:
        torch.set_num_threads(args.threads)
    models = args.models or (16 if args.dry_run else 1000 if args.gpu else 256)
    seq_models = args.seq_models or (1 if args.dry_run else 3 if args.gpu else 8)
    epochs = args.epochs or (2 if args.dry_run else 20)
    seq_epochs = min(args.seq_epochs or (1 if args.dry_run else 2 if args.gpu else epochs), epochs)
    X, y, Xte, yte = _data(side_by_side, n=2_000 if args.dry_run else 50_000)
    bs, C, lr = 64, 1.0, 0.5
    q = bs / len(y)
    sigma = get_noise_multiplier(target_epsilon=args.epsilon, target_delta=1e-5, sample_rate=q,
                                 steps=epochs * round(1 / q), accountant="prv")
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    gpu = f" gpu={torch.cuda.get_device_name()}" if args.gpu else ""
    say(f"device={device}{gpu} threads={torch.get_num_threads()} load={os.getloadavg()[0]:.2f} "
        f"torch={torch.__version__} LD_PRELOAD={os.environ.get('LD_PRELOAD', '-')}")
    say(f"DP-SGD linear heads: n={len(y)} d={X.shape[1]} epochs={epochs} q={q:.4f} sigma={sigma:.3f} eps={args.epsilon}"
        + ("; one canary row per model (in every other model's data set)" if args.canary_rows else ""))
    if side_by_side:
        new = "auto" if args.gpu else "static"
        batched(X, y, Xte, yte, 2, 1, bs, sigma, C, lr, device, "gather")  # warm-up: CUDA context, cuBLAS, allocator
        states: list = []
        s_old, a_old = batched(X, y, Xte, yte, models, epochs, bs, sigma, C, lr, device, "gather", states,
                               args.canary_rows)
        say(f"batched, eager steps (formulation='gather', the path before issue 43): {1 / s_old:8.2f} models/s  "
            f"({models} models in {s_old * models:.2f} s; mean test acc {a_old:.3f})")
    s_bat, a_bat = batched(X, y, Xte, yte, models, epochs, bs, sigma, C, lr, device,
                           new if side_by_side else "auto", states if side_by_side else None, args.canary_rows)
    label = f"batched, {'CUDA-graph' if args.gpu else 'static'} steps (formulation={new!r})" if side_by_side else "batched trainer"
    say(f"{label}: {1 / s_bat:8.2f} models/s  ({models} models in {s_bat * models:.2f} s; mean test acc {a_bat:.3f})")
    if side_by_side:
        say(f"ratio (eager / {new}): {s_old / s_bat:.2f}x; same random draws (generator end state): "
            f"{bool(torch.equal(states[0], states[1]))}")
    if args.gpu and not args.no_triton:  # the opt-in fused Triton clipped sum in the same CUDA graphs
        from privaudit.train import fused_triton

        if (why := fused_triton.available()) is not None:
            say(f"batched, CUDA-graph steps with the fused Triton clipped sum: not run ({why})")
        else:
            try:
                s_tri, a_tri = batched(X, y, Xte, yte, models, epochs, bs, sigma, C, lr, device, "triton", states)
                say(f"batched, CUDA-graph steps with the fused Triton clipped sum (formulation='triton'): "
                    f"{1 / s_tri:8.2f} models/s  ({models} models in {s_tri * models:.2f} s; mean test acc {a_tri:.3f}); "
                    f"ratio eager / triton {s_old / s_tri:.2f}x; same draws: {bool(torch.equal(states[0], states[-1]))}")
            except Exception as exc:  # noqa: BLE001 — report and go on: the other rows stand
                say(f"batched, fused Triton clipped sum FAILED: {type(exc).__name__}: {str(exc)[:500]}")
    if not args.no_sequential:
        s_seq, a_seq = sequential(X, y, Xte, yte, seq_models, seq_epochs, bs, sigma, C, lr, device)
        s_seq *= epochs / seq_epochs
        timed = f"timed on {seq_models} models" + (f" x {seq_epochs} epochs, scaled to {epochs}" if seq_epochs < epochs else "")
        say(f"sequential opacus: {1 / s_seq:8.2f} models/s  ({timed}; mean test acc {a_seq:.3f}"
            + (f" after {seq_epochs} epochs)" if seq_epochs < epochs else ")"))
        say(f"ratio (batched / sequential): {s_seq / s_bat:.1f}x; {models} sequential models would take {s_seq * models:.0f} s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    if args.kernel_profile is not None:
        if not args.gpu:
            raise SystemExit("--kernel-profile profiles the CUDA kernels: it needs --gpu")
        print("\n".join(kernel_profile(X, y, Xte, yte, models, bs, sigma, C, lr, args.kernel_profile)[:2]), flush=True)


if __name__ == "__main__":
    main()
