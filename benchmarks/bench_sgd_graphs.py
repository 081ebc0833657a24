"""Benchmark: the batched SGD trainer's epochs in CUDA graphs against its eager steps (issue 43).

The workload is one call of the default ``mlp`` defender's batched trainer at the scale where the fifth H200
lease found it launch-bound (``benchmarks/results/gpu/NVIDIA_H200/README.md``: 24 s a call at 50 000 rows,
whatever the number of models): hidden 64, batch 64, lr 0.05, 30 epochs, each model on 25 000 rows of a
synthetic 512-feature, 10-class table (the Defender half of 50 000), for M models. Each row times
``formulation="gather"`` (the eager steps, the path before) and ``"auto"`` (on CUDA, from two epochs: each
block of 32 steps captured once and replayed every epoch, :class:`privaudit.train.cuda_graphs.EpochBlocks`) as
alternating runs, fastest of ``--repeats``, with the ratio, whether the parameters are bit-identical (they
must be: a replay runs the eager step's kernels; deterministic kernels on) and how many blocks were captured.

A last row times the ``mlp`` defender's own fit (``kind: torch_mlp``, the plain PyTorch loop a user would write,
one model on the same rows: what the defenders stage's release fit and the one-run audit run) with its epochs in
CUDA graphs against the same loop eager (``torch_head.GRAPHED_EPOCHS`` off), the same way.

On the CPU ``auto`` is the eager path (no graphs): ``--dry-run`` runs the comparison shrunk (2 000 rows,
2 epochs, 4 models) to check the script; it measures nothing about graphs.

Run:  python benchmarks/bench_sgd_graphs.py [--models 2,32] [--repeats 2] [--out FILE]   (needs CUDA)
      python benchmarks/bench_sgd_graphs.py --dry-run
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from privaudit.defenders import torch_head
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.train import HeadRecipe, TrainData, cuda_graphs, train_heads


def _table(n: int, d: int, classes: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(classes, d, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return (centers[y] * 0.3 + torch.randn(n, d, generator=g)).to(device), y.to(device)


def _run(recipe: HeadRecipe, X: torch.Tensor, y: torch.Tensor, M: int, formulation: str) -> tuple[float, torch.Tensor]:
    device = X.device
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    heads = train_heads(recipe, TrainData(X, y, n_models=M), 10, torch.Generator(device=device).manual_seed(1),
                        formulation=formulation)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, heads.flat().cpu()


def _fit(X: torch.Tensor, y: torch.Tensor, epochs: int, graphed: bool) -> tuple[float, torch.Tensor]:
    """The ``mlp`` defender's own fit (params.yaml's recipe) on ``X``; its parameters flattened."""
    spec = validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [64], "epochs": epochs,
                                   "batch_size": 64, "lr": 0.05, "randomness": "unseeded"}, where="defenders[1]")
    torch_head.GRAPHED_EPOCHS = graphed
    Xn, yn = X.cpu().numpy(), y.cpu().numpy()
    if X.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    model = make_defender(spec, 10, device=str(X.device)).fit(Xn, yn, seed=1)
    if X.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, torch.cat([v.flatten().cpu() for v in model.net.state_dict().values()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="shrunk, on the CPU: checks the script")
    ap.add_argument("--models", default=None, help="comma-separated model counts (default 2,32; dry run 4)")
    ap.add_argument("--epochs", type=int, default=None, help="default 30 (dry run 2)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_sgd_graphs needs CUDA (or --dry-run on the CPU)")
    n = 2_000 if args.dry_run else 25_000
    epochs = args.epochs or (2 if args.dry_run else 30)
    models = [int(m) for m in (args.models or ("4" if args.dry_run else "2,32")).split(",")]
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)  # as the pipeline trains
    X, y = _table(n, 512, 10, device)
    recipe = HeadRecipe((64,), epochs, 64, 0.05)
    captures: list[int] = []
    real = cuda_graphs.capture
    cuda_graphs.capture = lambda *a, **kw: (captures.append(1), real(*a, **kw))[1]  # count the captured blocks
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run: no graphs)"
    say(f"device={device} ({name}) torch={torch.__version__} load={os.getloadavg()[0]:.2f}")
    say(f"batched SGD, MLP hidden 64, batch 64, lr 0.05, {epochs} epochs on {n} x 512 rows, 10 classes "
        f"({-(-n // 64)} steps an epoch); alternating runs, fastest of {args.repeats}")
    _run(HeadRecipe((64,), 2, 64, 0.05), X[:640], y[:640], 2, "auto")  # warm-up: CUDA context, cuBLAS
    for M in models:
        eager, graph, blocks = [], [], 0
        for _ in range(args.repeats):
            eager.append(_run(recipe, X, y, M, "gather"))
            before = len(captures)
            graph.append(_run(recipe, X, y, M, "auto"))
            blocks = len(captures) - before
        te, tg = min(t for t, _ in eager), min(t for t, _ in graph)
        same = all(torch.equal(p, eager[0][1]) for _, p in eager + graph)
        say(f"M={M:>4}: eager {te:8.2f} s   graphs {tg:8.2f} s   ratio x{te / tg:.2f}   blocks captured per call "
            f"{blocks}   parameters bit-identical: {same}")
    eager, graph = [], []
    for _ in range(args.repeats):
        eager.append(_fit(X, y, epochs, False))
        before = len(captures)
        graph.append(_fit(X, y, epochs, True))
        blocks = len(captures) - before
    te, tg = min(t for t, _ in eager), min(t for t, _ in graph)
    same = all(torch.equal(p, eager[0][1]) for _, p in eager + graph)
    say(f"torch_mlp defender fit (1 model): eager {te:8.2f} s   graphs {tg:8.2f} s   ratio x{te / tg:.2f}   blocks "
        f"captured per fit {blocks}   parameters bit-identical: {same}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
