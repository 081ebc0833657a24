"""Benchmark: torch operations and host reads per step of a white-box-watched opacus run (issue 43).

Counts, with ``torch.profiler`` on the CPU, the top-level ``aten`` operations and the host reads (``aten::item``,
``aten::_local_scalar_dense``, ``aten::equal``, ``aten::is_nonzero``: each one a sync on a GPU) per step of one fit of
the default ``dpsgd_eps1`` recipe (linear head, batch 64, lr 0.5, C 1, ε 1) on a 2 000 × 512 × 10 synthetic table,
one epoch, unwatched and inside ``privaudit.hooks.recording``. Counts do not depend on the machine; a GPU launches a
kernel per operation and waits at every host read.

Run:  python benchmarks/bench_hooks_ops.py [--out FILE]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

READS = ("aten::item", "aten::_local_scalar_dense", "aten::equal", "aten::is_nonzero")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from torch.profiler import ProfilerActivity, profile

    from privaudit import hooks
    from privaudit.defenders.registry import make_defender, validate_defender_spec

    g = np.random.default_rng(0)
    X, y = g.normal(size=(2000, 512)).astype(np.float32), g.integers(0, 10, 2000)
    spec = validate_defender_spec({"name": "dpsgd_eps1", "kind": "dp_sgd", "epsilon": 1.0, "delta": 1e-5, "epochs": 1,
                                   "batch_size": 64, "lr": 0.5, "max_grad_norm": 1.0}, where="defenders[2]")
    make_defender(spec, 10).fit(X, y, 0)  # imports, σ
    lines = []
    for watched in (False, True):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            if watched:
                with hooks.recording(seed=2) as rec:
                    model = make_defender(spec, 10).fit(X, y, 1)
                rec.observations()  # the run's one read at its end
            else:
                model = make_defender(spec, 10).fit(X, y, 1)
        ops = [e for e in prof.events() if e.name.startswith("aten::")]
        top = [e for e in ops if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
        reads = [e for e in ops if e.name in READS]
        steps = model.steps_taken
        lines.append(f"{'watched  ' if watched else 'unwatched'}  {len(top) / steps:6.1f} top-level aten ops a step   "
                     f"{len(reads) / steps:6.2f} host reads a step   ({steps} steps)")
        print(lines[-1], flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
