"""Benchmark: the batched trainer against the machine — models/s, useful GFLOP/s and % of fp32 matmul peak.

1. The machine's fp32 matmul peak: best of a few ``torch.mm`` of two 4096² matrices, measured before
   and after the rows; the larger of the two is the denominator of "% of peak".
2. For each row (linear head or one-hidden-layer MLP, SGD or DP-SGD, M heads) on synthetic
   CIFAR-size features (50 000 × 512, 10 classes): :func:`privaudit.train.train_heads` on all M
   heads at once; printed as models/s, useful GFLOP/s and % of peak.
3. The ratio to a sequential opacus loop at equal work (256 DP-SGD linear heads on digits, the
   workload of ``bench_canary_training.py``: same epochs, q, σ, C, lr), timed as alternating pairs
   (``--ratio-repeats``, default 5) and quoted as the median of the per-pair ratios with their range.

4. ``--compare-eager`` (default on CUDA): every ``dp`` row timed again with the eager steps
   (``formulation="gather"``, the path before issue 43) next to the default (on CUDA, ``auto``: fixed-shape
   steps replayed as CUDA graphs for runs of ≥ 64 steps — pass ``--steps 128`` or more; on the CPU,
   ``static`` steps without graphs, as a dry run), as alternating runs, with the ratio.
5. ``--kernel-builds``: the DP-SGD linear row at M = 1024 (CPU) once per build of the native kernel
   (:data:`privaudit.train.native.ISAS`: ``avx2`` and, where the CPU has AVX-512F, ``avx512``), timed
   as alternating runs, with each build's % of peak, its speed relative to the AVX2 build and whether
   its parameters are bit-identical to the AVX2 build's (they must be).

Rows are timed ``--repeats`` times (default 2) and the fastest is reported, like the peak: this
shared 2-core host drifts by up to 2× over minutes.

**Useful FLOPs** are counted analytically, per example actually in a batch, matmul work only
(forward, back-propagated deltas, weight gradients; biases, softmax, norms and clipping are not
counted): a linear head ``d → C`` needs ``4dC`` per example, an MLP ``d → H → C`` needs
``4dH + 6HC``. Work the trainer does on padding or on rows outside a model's batch is never
counted. DP-SGD rows count the expected Poisson batch (q·n per model per step; the realised
count differs by < 0.1 % at these sizes).

Workloads per row (kept short so all rows run in minutes; per-step cost does not depend on the
number of steps, except the one-off initialisation):

* DP-SGD: n = 50 000 rows, expected batch 256 (q = 0.00512), ``--steps`` steps (default 10);
  ``dp-obs`` rows are the same run observed for the white-box audit
  (:class:`privaudit.train.observe.HeadsObserver`: a canary per model and step, noise summaries).
* SGD: one shuffled epoch over the first ``--steps`` × 256 rows (default 2 560 rows, 10 steps of
  256) — every row of the epoch is in a batch, so all of it is useful.

Run:  nice python benchmarks/bench_many_heads.py [--kernel-builds] [--quick] [--rows 'linear-dp-*'] [--repeats 2] [--device cuda] [--out FILE]
      (``--rows`` takes comma-separated shell patterns over ``{linear,mlp}-{sgd,dp,dp-obs}-{M}`` and
      ``opacus``.)
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from privaudit.train import DPSettings, HeadRecipe, TrainData, train_heads
from privaudit.train.observe import HeadsObserver

N_ROWS, DIM, CLASSES, HIDDEN, BATCH = 50_000, 512, 10, 64, 256


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(size: int = 4096, repeats: int = 3, device: str = "cpu") -> float:
    """Best fp32 GFLOP/s of one ``torch.mm`` of two size² matrices (on CUDA 8192², at torch's default
    fp32 matmul precision, which the trainer runs at)."""
    if device.startswith("cuda"):
        size, repeats = 8192, 10
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=g).to(device) for _ in range(2))
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * size**3 / best / 1e9


def flops_per_example(hidden: tuple[int, ...], d: int = DIM, c: int = CLASSES) -> int:
    if not hidden:
        return 4 * d * c
    (h,) = hidden
    return 4 * d * h + 6 * h * c


def features(n: int = N_ROWS, d: int = DIM, seed: int = 0, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, d, generator=g)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    X = centers[y] * 0.3 + torch.randn(n, d, generator=g)
    return X.to(device), y.to(device)


def run_row(kind: str, algo: str, M: int, steps: int, X: torch.Tensor, y: torch.Tensor,
            formulation: str = "auto") -> tuple[float, float]:
    """Seconds and useful FLOPs of one row (``algo`` ``dp-obs``: DP-SGD observed for the white-box audit)."""
    hidden = () if kind == "linear" else (HIDDEN,)
    observer = HeadsObserver(seed=0) if algo == "dp-obs" else None
    if algo in ("dp", "dp-obs"):
        q = BATCH / len(y)
        recipe = HeadRecipe(hidden, 1, BATCH, 0.1, dp=DPSettings(1.0, 1.0, q, steps, float(BATCH)))
        data = TrainData(X, y, n_models=M)
        examples = q * len(y) * M * steps
    else:
        n = steps * BATCH
        recipe = HeadRecipe(hidden, 1, BATCH, 0.1, momentum=0.9)
        data = TrainData(X[:n], y[:n], n_models=M)
        examples = n * M
    device = str(X.device)
    _sync(device)
    t = time.perf_counter()
    train_heads(recipe, data, CLASSES, torch.Generator(device=X.device).manual_seed(1), observer=observer,
                formulation=formulation)
    _sync(device)
    return time.perf_counter() - t, examples * flops_per_example(hidden)


def opacus_ratio(quick: bool, repeats: int, device: str = "cpu") -> list[str]:
    """Sequential opacus vs batched on 256 DP-SGD linear heads on digits (bench_canary_training's workload).

    The two are timed alternately ``repeats`` times (this machine's speed drifts by up to 2× over
    minutes on a shared host); the ratio quoted is the median of the per-pair ratios.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from opacus.accountants.utils import get_noise_multiplier

    import bench_canary_training as bct

    X, y, Xte, yte = bct._data(False)
    epochs, seq_models, models = (2, 2, 256) if quick else (20, 8, 256)
    bs, C, lr = 64, 1.0, 0.5
    q = bs / len(y)
    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=q,
                                 steps=epochs * round(1 / q), accountant="prv")
    pairs = []
    for _ in range(repeats):
        s_seq, a_seq = bct.sequential(X, y, Xte, yte, seq_models, epochs, bs, sigma, C, lr, device)
        s_bat, a_bat = bct.batched(X, y, Xte, yte, models, epochs, bs, sigma, C, lr, device)
        pairs.append((s_seq, s_bat))
    ratios = sorted(s / b for s, b in pairs)
    s_seq, s_bat = (statistics.median(x) for x in zip(*pairs))
    return [
        f"opacus ratio, 256 DP-SGD linear heads on digits (n=900, d=64, epochs={epochs}, q={q:.4f}, "
        f"sigma={sigma:.3f}, C={C}, lr={lr}), {repeats} alternating pairs:",
        f"  sequential opacus: {1 / s_seq:8.2f} models/s median (timed on {seq_models} models; mean test acc {a_seq:.3f})",
        f"  batched trainer:   {1 / s_bat:8.2f} models/s median ({models} models in {s_bat * models:.2f} s; "
        f"mean test acc {a_bat:.3f})",
        f"  ratio (batched / sequential), per pair: {', '.join(f'{r:.1f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.1f}x",
    ]


def kernel_builds(steps: int, repeats: int, X: torch.Tensor, y: torch.Tensor, M: int = 1024,
                  ) -> list[tuple[str, float, float, bool]]:
    """The ``linear-dp-{M}`` row once per build of the native kernel, alternating, fastest of ``repeats``:
    (build, seconds, useful GFLOP/s, parameters bit-identical to the AVX2 build's) per build."""
    from privaudit.train import native

    isas = ["avx2"] + (["avx512"] if "avx512f" in (native._cpu_flags() or set()) else [])
    q = BATCH / len(y)
    recipe = HeadRecipe((), 1, BATCH, 0.1, dp=DPSettings(1.0, 1.0, q, steps, float(BATCH)))
    examples = q * len(y) * M * steps
    times: dict[str, list[float]] = {i: [] for i in isas}
    flats: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for isa in isas:
            kernel = native.load_kernel(isa)
            native._reset()
            native._state["kernel"], native._state["reason"] = kernel, None
            try:
                t = time.perf_counter()
                heads = train_heads(recipe, TrainData(X, y, n_models=M), CLASSES, torch.Generator().manual_seed(1),
                                    formulation="native")
                times[isa].append(time.perf_counter() - t)
            finally:
                native._reset()
            flats[isa] = heads.flat()
    return [(isa, min(times[isa]), examples * flops_per_example(()) / min(times[isa]) / 1e9,
             torch.equal(flats[isa], flats["avx2"])) for isa in isas]


def machine(device: str = "cpu") -> str:
    gpu = f" gpu={torch.cuda.get_device_name(torch.device(device))}" if device.startswith("cuda") else ""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"cpu={model} cores={os.cpu_count()} torch_threads={torch.get_num_threads()} "
            f"torch={torch.__version__} capability={torch.backends.cpu.get_cpu_capability()} "
            f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '-')} python={platform.python_version()}"
            f" device={device}{gpu}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: M in {16, 256}, 2 steps, short opacus loop")
    ap.add_argument("--rows", default="*", help="comma-separated patterns over {linear,mlp}-{sgd,dp,dp-obs}-{M} and "
                    "'opacus'")
    ap.add_argument("--steps", type=int, default=None, help="DP-SGD steps / SGD steps of 256 (default 10; quick 2)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's, all cores)")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda: rows, peak and opacus ratio on it")
    ap.add_argument("--repeats", type=int, default=2, help="runs per row, the fastest reported (default 2; the "
                    "peak is a best-of-3 too)")
    ap.add_argument("--ratio-repeats", type=int, default=5, help="alternating opacus/batched pairs (default 5)")
    ap.add_argument("--compare-eager", action=argparse.BooleanOptionalAction, default=None,
                    help="also time each dp row with eager steps (formulation='gather'), side by side (default: on "
                    "with --device cuda)")
    ap.add_argument("--kernel-builds", action="store_true", help="also time linear-dp-1024 once per native kernel "
                    "build (avx2, avx512 where the CPU has it), side by side (CPU only)")
    ap.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda needs CUDA; none is available here")
    if args.threads:
        torch.set_num_threads(args.threads)
    pats = [p.strip() for p in args.rows.split(",") if p.strip()]
    want = lambda name: any(fnmatch.fnmatch(name, p) for p in pats)  # noqa: E731
    steps = args.steps or (2 if args.quick else 10)
    sizes = (16, 256) if args.quick else (16, 256, 1024)
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(machine(args.device))
    say(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    todo = [(f"{kind}-{algo}-{M}", kind, algo, M) for kind in ("linear", "mlp") for algo in ("sgd", "dp", "dp-obs")
            for M in sizes if want(f"{kind}-{algo}-{M}")]
    rows = []
    if todo or args.kernel_builds:
        peak = matmul_peak(device=args.device)
        say(f"fp32 matmul peak (torch.mm, best of several): {peak:.1f} GFLOP/s before the rows; measured again "
            f"after them, and the larger of the two is the % of peak denominator")
        say(f"features {N_ROWS} x {DIM}, {CLASSES} classes, batch {BATCH}, MLP hidden {HIDDEN}; "
            f"DP: {steps} steps at q={BATCH / N_ROWS:.5f}; SGD: 1 epoch over {steps * BATCH} rows")
        say(f"each row: fastest of {args.repeats} runs (one-off set-up included)")
        X, y = features(device=args.device)
    compare = args.device.startswith("cuda") if args.compare_eager is None else args.compare_eager
    new = "auto" if args.device.startswith("cuda") else "static"
    pairs = []
    for name, kind, algo, M in todo:
        if compare and algo == "dp":
            both = [(run_row(kind, algo, M, steps, X, y, "gather")[0], run_row(kind, algo, M, steps, X, y, new))
                    for _ in range(args.repeats)]
            old_dt = min(b[0] for b in both)
            dt, fl = min(b[1] for b in both)
            pairs.append((name, old_dt, dt))
        else:
            dt, fl = min(run_row(kind, algo, M, steps, X, y) for _ in range(args.repeats))
        rows.append((name, M, dt, fl / dt / 1e9))
        print(f"  ({name}: {dt:.2f} s)", flush=True)
    builds = []
    if args.kernel_builds and args.device == "cpu":
        try:
            builds = kernel_builds(steps, args.repeats, X, y)
        except OSError as exc:  # no C compiler on this host: say so, keep the other rows
            say(f"native kernel builds: not run ({exc})")
    if rows or args.kernel_builds:
        # This shared host's speed drifts: the peak is taken again after the rows and the larger
        # measurement is the denominator (the % of peak is never inflated by a slow peak run).
        after = matmul_peak(device=args.device)
        peak = max(peak, after)
        say(f"fp32 matmul peak after the rows: {after:.1f} GFLOP/s; denominator {peak:.1f} GFLOP/s")
    if rows:
        say(f"{'row':<18}{'models':>7}{'seconds':>10}{'models/s':>11}{'useful GFLOP/s':>16}{'% of peak':>11}")
    for name, M, dt, rate in rows:
        say(f"{name:<18}{M:>7}{dt:>10.2f}{M / dt:>11.1f}{rate:>16.2f}{100 * rate / peak:>10.1f}%")
    if pairs:
        say(f"dp rows side by side, alternating runs, fastest of {args.repeats}: eager steps (formulation='gather', "
            f"the path before issue 43) vs formulation={new!r}"
            + (" (CUDA graphs from 64 steps)" if new == "auto" else " (fixed-shape steps, no graphs: a dry run)"))
        for name, old_dt, dt in pairs:
            say(f"  {name:<18} eager {old_dt:8.3f} s   {new} {dt:8.3f} s   ratio x{old_dt / dt:.2f}")
    if builds:
        say(f"native kernel builds, linear-dp-1024 ({steps} steps), alternating runs, fastest of {args.repeats}:")
        base = builds[0][1]
        for isa, dt, rate, same in builds:
            say(f"  {isa:<7}{dt:>8.2f} s{rate:>10.2f} GFLOP/s{100 * rate / peak:>7.1f}% of peak  x{base / dt:.2f} "
                f"vs avx2  parameters bit-identical to avx2: {same}")
        if len(builds) == 1:
            say("  (this CPU has no AVX-512F: only the avx2 build ran)")
    if want("opacus"):
        for s in opacus_ratio(args.quick, 1 if args.quick else args.ratio_repeats, args.device):
            say(s)
    say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
