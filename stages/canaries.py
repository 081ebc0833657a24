"""Stage canaries: Game-3 run and LiDP trials per audited defender → raw per-canary statistics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.canaries.experiments import check_lidp_sizes, run_game3, run_lidp_trials
from privaudit.config import Params
from privaudit.defenders.training import load_feature_set
from privaudit.features import resolve_device
from privaudit.seeding import rng_for
from stages._runner import progress_enabled, run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/canaries"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Train the canary-augmented models of Game 3 and of the LiDP trials."""
    ensure_writable(args.out)
    fs = load_feature_set(args.features, args.split)
    device = resolve_device(params.base.device)
    seed, lidp = params.base.seed, params.lidp
    k, m = lidp.k_canaries(), lidp.m_null()
    check_lidp_sizes(fs, k, m, lidp.trials)
    if params.game3.canaries > int(fs.is_defender.sum()):
        raise ValueError(f"game3.canaries={params.game3.canaries} exceeds the {int(fs.is_defender.sum())} Defender samples")
    with atomic_dir(args.out) as tmp:
        for spec in params.audited_defenders():
            name = spec["name"]
            (tmp / name).mkdir()
            g3 = run_game3(spec, fs, params.game3.canaries, rng_for(seed, "canaries", "game3", name), device)
            np.savez(tmp / name / "game3.npz", **g3.as_arrays())
            bar = (lambda it: tqdm(it, desc=f"lidp {name}", unit="trial")) if progress_enabled() else (lambda it: it)
            rngs = (rng_for(seed, "canaries", "lidp", name, t) for t in range(lidp.trials))
            loss_in, loss_null = run_lidp_trials(spec, fs, k, m, rngs, device, progress=bar)
            np.savez(tmp / name / "lidp.npz", loss_in=loss_in, loss_null=loss_null)
            print(f"canaries: {name}: Game 3 with {params.game3.canaries} canaries; "
                  f"{lidp.trials} LiDP trials with K={k}, m={m}")


if __name__ == "__main__":
    sys.exit(run_stage("canaries", _args, _body, torch_threads=1))
