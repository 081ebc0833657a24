"""Start-up cost of every DVC stage and of the ``privaudit`` CLI (issue 43, item 4).

Each stage is a new Python process; what it imports at module level is paid on every ``dvc repro``
stage run, before any work. For every module in :data:`TARGETS` this script runs, in fresh
subprocesses:

* ``python -c "import <module>"`` and lists the heavy third-party modules then in ``sys.modules``
  (:data:`HEAVY`);
* ``python -m <module> --help`` (``privaudit --help`` for the CLI) and takes its wall time, the
  median of ``--repeats`` runs after one warm-up run (file-system cache warm).

It prints a table (stage, median wall of ``--help`` in seconds, min, heavy modules) and the machine
load (``os.getloadavg``) before and after, so a number on a shared machine can be judged. Timing
lives here, not in a unit test; ``tests/unit/test_stage_imports.py`` pins the heavy-module sets.

Usage::

    python benchmarks/bench_stage_startup.py [--repeats 5] [--out benchmarks/results/stage_startup_cpu.txt]
"""

from __future__ import annotations

import argparse
import os
import platform
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


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def heavy_modules(module: str) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after ``import module`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _PROBE, module, *HEAVY], capture_output=True, text=True,
                         env=_env(), cwd=ROOT, check=True)
    return out.stdout.split()


def help_wall(module: str, repeats: int) -> list[float]:
    """Wall seconds of ``python -m module --help`` (the CLI: ``privaudit --help``), one warm-up then ``repeats`` runs."""
    cmd = [sys.executable, "-m", module, "--help"]
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=_env(), cwd=ROOT, check=True)
        if i:
            times.append(time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per stage after one warm-up (default 5)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    parser.add_argument("--label", default="", help="a heading line for the table (e.g. 'before' / 'after')")
    args = parser.parse_args(argv)
    lines = []
    if args.label:
        lines.append(f"## {args.label}")
    load0 = os.getloadavg()
    lines.append(f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}; "
                 f"load before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    lines.append(f"{'module':<22} {'--help median s':>15} {'min s':>7}  heavy modules after import")
    for module in TARGETS:
        times = help_wall(module, args.repeats)
        heavy = heavy_modules(module)
        lines.append(f"{module:<22} {statistics.median(times):>15.2f} {min(times):>7.2f}  {' '.join(heavy) or '-'}")
        print(lines[-1], flush=True)
    load1 = os.getloadavg()
    lines.append(f"load after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; median of {args.repeats} runs after one warm-up")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
