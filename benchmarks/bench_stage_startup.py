"""Start-up cost of every DVC stage and of the ``privaudit`` CLI (issue 43, item 4).

Each stage is a new Python process; what it imports at module level is paid on every ``dvc repro``
stage run, before any work. For every module in :data:`TARGETS` this script runs, in fresh
subprocesses:

* ``python -c "import <module>"`` and lists the heavy third-party modules then in ``sys.modules``
  (:data:`HEAVY`);
* ``python -m <module> --help`` (for the CLI ``python -m privaudit.cli --help``) and takes its wall
  time and its CPU time (user + system of the child), the median of ``--repeats`` runs after one
  warm-up run (file-system cache warm). On a loaded shared machine the wall time grows with the
  load, the CPU time much less; start-up runs on one thread, so the CPU time is a lower bound of
  the wall time on idle cores.

It prints a table (stage, median wall of ``--help`` in seconds, min, heavy modules) and the machine
load (``os.getloadavg``) before and after, so a number on a shared machine can be judged. With
``--baseline DIR`` (a checkout of other code, e.g. ``git archive <rev> src stages | tar -x -C DIR``)
each stage is timed from that code too, in turns with this checkout's (base, this, base, this, ...),
so both columns see the same load. Timing lives here, not in a unit test; ``tests/unit/test_stage_imports.py`` pins the heavy-module sets.

Usage::

    python benchmarks/bench_stage_startup.py [--repeats 5] [--baseline DIR] [--out benchmarks/results/stage_startup_cpu.txt]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TARGETS: tuple[str, ...] = tuple(
    sorted(f"stages.{p.stem}" for p in (ROOT / "stages").glob("*.py") if not p.stem.startswith("_"))
) + ("privaudit.cli",)

HEAVY: tuple[str, ...] = (
    "torch", "great_expectations", "sklearn", "opacus", "prefect", "dvc", "pandas", "scipy", "matplotlib",
    "rich", "tqdm", "torchvision", "skops", "numba",
)

_PROBE = (
    "import importlib, sys; importlib.import_module(sys.argv[1]); "
    "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[2:]))))"
)


def _env(root: Path) -> dict[str, str]:
    """The environment of a child that imports ``stages`` and ``privaudit`` from checkout ``root``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(root)])
    return env


def heavy_modules(module: str, root: Path = ROOT) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after ``import module`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _PROBE, module, *HEAVY], capture_output=True, text=True,
                         env=_env(root), cwd=root, check=True)
    return out.stdout.split()


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def help_walls(module: str, repeats: int, roots: list[Path]) -> list[tuple[list[float], list[float]]]:
    """``(wall, cpu)`` seconds of ``python -m module --help`` from each checkout in ``roots``: one warm-up run
    each, then ``repeats`` rounds that run every root once in turn (so the roots share the machine's load)."""
    cmd = [sys.executable, "-m", module, "--help"]
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in roots]
    for i in range(repeats + 1):
        for j, root in enumerate(roots):
            c0, t0 = _child_cpu(), time.perf_counter()
            subprocess.run(cmd, capture_output=True, env=_env(root), cwd=root, check=True)
            wall, cpu = time.perf_counter() - t0, _child_cpu() - c0
            if i:
                times[j][0].append(wall)
                times[j][1].append(cpu)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per stage after one warm-up (default 5)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    parser.add_argument("--label", default="", help="a heading line for the table")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout (src/ and stages/) of the code to compare with, timed in turns with this one")
    parser.add_argument("--modules", nargs="+", default=list(TARGETS), choices=TARGETS, metavar="MODULE",
                        help="time only these (default: every stage and privaudit.cli)")
    args = parser.parse_args(argv)
    roots = [args.baseline.resolve(), ROOT] if args.baseline else [ROOT]
    lines = []
    if args.label:
        lines.append(f"## {args.label}")
    load0 = os.getloadavg()
    lines.append(f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}; "
                 f"load before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    if args.baseline:
        lines.append(f"baseline: {roots[0]}; this checkout: {ROOT}")
    head = "".join(f"{'base wall':>10} {'min':>5} {'base cpu':>8}  {'base heavy modules':<38}" for _ in roots[1:])
    lines.append(f"{'module':<22}{head} {'wall s':>7} {'min':>5} {'cpu s':>6}  heavy modules after import")
    for module in args.modules:
        times = help_walls(module, args.repeats, roots)
        cols = ""
        for root, (wall, cpu) in zip(roots, times):
            heavy = " ".join(heavy_modules(module, root)) or "-"
            if root == ROOT:
                cols += f" {statistics.median(wall):>7.2f} {min(wall):>5.2f} {statistics.median(cpu):>6.2f}  {heavy}"
            else:
                cols += f"{statistics.median(wall):>10.2f} {min(wall):>5.2f} {statistics.median(cpu):>8.2f}  {heavy:<38}"
        lines.append(f"{module:<22}{cols}")
        print(lines[-1], flush=True)
    load1 = os.getloadavg()
    lines.append(f"load after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; median of {args.repeats} runs after one warm-up "
                 "(wall: seconds of `python -m <module> --help`, median and min; cpu: its user + system seconds, median)")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
