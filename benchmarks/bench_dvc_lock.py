"""Benchmark: what DVC spends rewriting ``dvc.lock`` after each stage of ``dvc repro``.

DVC updates the lock file after every stage it runs: it parses the whole file with ruamel's round-trip loader
(``dvc.utils.serialize._yaml.parse_yaml_for_update``, comments and layout kept) and writes it back
(``dumps_yaml``). A cProfile of a default ``dvc repro`` (2 cores, session 60) put this at most of DVC's own time
between stages. This times those two calls, on the repository's own ``dvc.lock`` (``--lock``), as DVC makes them
once per stage: the median of ``--repeats``, times the stages in the lock (a full ``dvc repro`` rewrites it
once per stage it runs).

Run:  python benchmarks/bench_dvc_lock.py [--lock dvc.lock] [--repeats 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pairs import report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lock", type=Path, default=Path("dvc.lock"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import dvc
    import yaml
    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml_for_update

    text = args.lock.read_text(encoding="utf-8")
    stages = len(yaml.safe_load(text).get("stages", {}))
    parse, dump = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        data = parse_yaml_for_update(text, str(args.lock))
        parse.append(time.perf_counter() - t)
        t = time.perf_counter()
        dumps_yaml(data)
        dump.append(time.perf_counter() - t)
    per_stage = statistics.median(parse) + statistics.median(dump)
    lines = [f"dvc {dvc.__version__}: rewriting {args.lock} ({len(text)} bytes, {len(text.splitlines())} lines, "
             f"{stages} stages) as DVC does after each stage; median of {args.repeats}, load "
             f"{os.getloadavg()[0]:.2f}",
             f"round-trip parse {statistics.median(parse):.3f} s + dump {statistics.median(dump):.3f} s = "
             f"{per_stage:.3f} s a stage; x {stages} stages = {per_stage * stages:.1f} s of a full `dvc repro`"]
    report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
