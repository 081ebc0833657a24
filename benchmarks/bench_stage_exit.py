"""Benchmark: how long a stage process takes to end after its last line, normal exit against ``end_process``.

The plain way a Python CLI ends is ``sys.exit(code)``: the interpreter then tears down every module it loaded
(torch, Great Expectations, scikit-learn, pandas, opacus: what a stage and the warm server import). A stage now
ends with :func:`stages._runner.end_process` (flush, ``atexit`` handlers, ``os._exit``). Each arm runs in a fresh
process that imports the warm server's preload list (:data:`privaudit.repro.warm.server.PRELOAD`), runs a stage
body that prints one line with the time, and ends — through ``run_stage`` as a real stage process (``argv=None``:
``end_process``) or as the same call made in-process (``argv`` given: no ``end_process``, ``sys.exit``). The figure
is the time from that line to the moment the parent sees the process gone; arms alternate, in a scratch folder.

Usage: ``PYTHONPATH=src:. python benchmarks/bench_stage_exit.py [--pairs 3] [--out FILE]``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.pairs import pair_summary, report  # noqa: E402

_ARM = r"""
import importlib, json, sys, time
from privaudit.repro.warm.server import PRELOAD
for name in PRELOAD:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
from stages._runner import run_stage

def body(args, params):
    print(json.dumps({{"last_line": time.time()}}), flush=True)

argv = ["--params", {params!r}]
sys.argv = ["bench_stage_exit", *argv]
sys.exit(run_stage("bench_stage_exit", lambda p: None, body, None if {fast} else argv))
"""


def _arm(fast: bool, cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    code = _ARM.format(params=str(ROOT / "params.yaml"), fast=fast)
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    gone = time.time()
    return gone - float(json.loads(res.stdout.strip().splitlines()[-1])["last_line"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    normal, fast = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.pairs):
            normal.append(_arm(False, Path(tmp)))
            fast.append(_arm(True, Path(tmp)))
    report(pair_summary(
        "bench_stage_exit: seconds from a stage's last line to its process's end, in a process that imported the "
        "warm server's preload list (torch, Great Expectations, scikit-learn, pandas, opacus, ...)",
        ("sys.exit (the interpreter's teardown)", normal), ("end_process (atexit handlers, os._exit)", fast),
        load_before, digits=3), args.out)

if __name__ == "__main__":
    main()
