"""Stage defenders: train every ``defenders[i]`` → ``data/defenders/<name>/`` (model, outputs, info)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.config import Params
from privaudit.defenders.training import load_feature_set, train_one, write_defender
from privaudit.features import resolve_device
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/defenders"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Train each defender recipe on the Defender set and record per-sample outputs."""
    ensure_writable(args.out)
    fs = load_feature_set(args.features, args.split)
    device = resolve_device(params.base.device)
    with atomic_dir(args.out) as tmp:
        for spec in params.defenders:
            model, outputs, info = train_one(spec, fs, params.base.seed, device)
            write_defender(tmp / spec["name"], model, outputs, info)
            print(f"defenders: {spec['name']} ({spec['kind']}): train acc {info['train_accuracy']:.3f}, "
                  f"test acc {info['test_accuracy']:.3f}, utility {info['utility']:.3f}, "
                  f"claimed eps {info['claimed_epsilon']}")


if __name__ == "__main__":
    sys.exit(run_stage("defenders", _args, _body, torch_threads=1))
