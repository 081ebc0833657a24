"""Stage canaries: Game-3 runs and LiDP trials per audited defender → raw per-canary statistics.

Trials run in shards (privaudit.canaries.shards): missing shards are computed locally or on the
Dask cluster at ``compute.scheduler`` and saved in ``data/.shards/canaries`` as they finish, so
a killed stage resumes; then all shards are assembled into ``data/canaries/<defender>/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.canaries.runner import check_canary_setup
from privaudit.canaries.sizes import game3_canaries
from privaudit.canaries.shards import (
    DEFAULT_SHARD_ROOT,
    inputs_fingerprint,
    load_shard,
    missing_shards,
    plan_shards,
    prune_shards,
    run_shard,
    save_shard,
)
from privaudit.config import Params
from privaudit.features.feature_set import load_feature_set
from privaudit.features import resolve_device
from privaudit.validation import validate_canary_stats
from stages._runner import progress_enabled, run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/canaries"))
    p.add_argument("--shards", type=Path, default=DEFAULT_SHARD_ROOT, help="store of finished shards")


def _run_missing(params: Params, fs, todo, root: Path, device: str) -> None:  # type: ignore[no-untyped-def]
    bar = tqdm(total=sum(s.stop - s.start for s in todo), unit="trial", desc="canaries",
               disable=not progress_enabled())
    if params.compute.scheduler == "local":
        for shard in todo:
            save_shard(root, params, shard, run_shard(params, fs, shard, device))
            bar.update(shard.stop - shard.start)
    else:
        from distributed import Client, as_completed

        with Client(params.compute.scheduler) as client:
            fs_f = client.scatter(fs, broadcast=True)
            futures = {client.submit(run_shard, params, fs_f, s, device, pure=False): s for s in todo}
            for fut in as_completed(futures):
                shard = futures[fut]
                save_shard(root, params, shard, fut.result())
                bar.update(shard.stop - shard.start)
    bar.close()


def _statistic(params: Params) -> str:
    lp = params.lidp
    if lp.canary_type != "random_gradient":
        return "cross-entropy loss"
    if lp.gradient_reference:
        return (f"inner product <c, theta_T - theta_0 - mean displacement of {lp.gradient_reference} "
                "canary-free heads>")
    return "inner product <c, theta_T - theta_0>"


def _body(args: argparse.Namespace, params: Params) -> None:
    """Train the canary-augmented models of Game 3 and of the LiDP trials (resumable shards)."""
    ensure_writable(args.out)
    fs = load_feature_set(args.features, args.split)
    check_canary_setup(params, fs)
    device = resolve_device(params.base.device)
    todo = missing_shards(args.shards, params, fs)
    plan = plan_shards(params)
    print(f"canaries: {len(plan) - len(todo)} of {len(plan)} shards already finished; running {len(todo)} "
          f"({'locally' if params.compute.scheduler == 'local' else 'on ' + params.compute.scheduler})")
    _run_missing(params, fs, todo, args.shards, device)
    fp = inputs_fingerprint(fs)
    lp = params.lidp
    n_game3 = game3_canaries(params, int(fs.is_defender.sum()))  # game3.canaries: auto resolved
    with atomic_dir(args.out) as tmp:
        for spec in params.audited_defenders():
            name = spec.name
            (tmp / name).mkdir()
            for exp in ("game3", "lidp"):
                shards = [load_shard(args.shards, params, s) for s in plan if s.defender == name and s.experiment == exp]
                if any(str(a["inputs_fingerprint"]) != fp for a in shards):
                    raise ValueError(f"a shard of {name}/{exp} under {args.shards} was computed on other inputs")
                if exp == "game3":  # runs x canaries, flattened to one row per canary
                    arrays = {k: np.concatenate([a[k].reshape(-1, *a[k].shape[2:]) for a in shards])
                              for k in ("true_label", "label_pair", "bit", "proba")}
                    rows = np.concatenate([a["canary_index"] for a in shards])
                    arrays["defender_row"] = rows.reshape(-1)
                    arrays["run"] = np.repeat(np.arange(rows.shape[0]), rows.shape[1])
                    if params.game3.runs == 1:
                        arrays["canary_index"] = arrays.pop("defender_row")
                    validate_canary_stats("game3", arrays)
                else:
                    arrays = {k: np.concatenate([a[k] for a in shards]) for k in ("loss_in", "loss_null")}
                    if lp.canary_type == "random_gradient":
                        # <c, theta> may be negative: checked as signed statistics, not losses
                        arrays = {"stat_in": arrays["loss_in"], "stat_null": arrays["loss_null"]}
                    validate_canary_stats("lidp", arrays)
                np.savez(tmp / name / f"{exp}.npz", **arrays)
            write_json(tmp / name / "meta.json", {
                "game3": {"canaries": n_game3, "canaries_setting": params.game3.canaries,
                          "runs": params.game3.runs, "n_classes": fs.n_classes,
                          "game": "label_flip" if fs.n_classes == 2 else "two_wrong_labels"},
                "lidp": {"trials": lp.trials, "canaries": lp.k_canaries(), "null_canaries": lp.m_null(),
                         "canary_type": lp.canary_type, "neighbourhood": lp.neighbourhood,
                         "statistic": _statistic(params)},
                "inputs_fingerprint": fp,
            })
            print(f"canaries: {name}: Game 3 with {params.game3.runs} x {n_game3} canaries{' (label flip, C = 2)' if fs.n_classes == 2 else ''}; "
                  f"{lp.trials} LiDP trials ({lp.neighbourhood}, {lp.canary_type}) with K={lp.k_canaries()}, "
                  f"m={lp.m_null()}")
    if params.compute.prune_shards:
        removed = prune_shards(args.shards, params)
        if removed:
            print(f"canaries: pruned {len(removed)} shard director{'y' if len(removed) == 1 else 'ies'} of other "
                  f"params/code under {args.shards} (compute.prune_shards: false keeps them)")


if __name__ == "__main__":
    sys.exit(run_stage("canaries", _args, _body, torch_threads=1))
