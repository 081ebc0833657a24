"""Stage lidp: Lifted-DP ε lower bounds; merges Game 3 into ``metrics/audit.json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import ensure_writable, read_json, write_json
from privaudit.attacks.lidp_audit import lidp_audit
from privaudit.config import Params
from privaudit.seeding import rng_for
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--canaries", type=Path, default=Path("data/canaries"))
    p.add_argument("--game3", type=Path, default=Path("data/audit/game3.json"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("metrics/audit.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Algorithm 1 of Pillutla et al. with tau tuned on held-out trials; verdict vs claimed eps."""
    ensure_writable(args.out)
    lp = params.lidp
    game3 = read_json(args.game3)
    audit = {}
    for spec in params.audited_defenders():
        name = spec["name"]
        path = args.canaries / name / "lidp.npz"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (run the canaries stage)")
        with np.load(path, allow_pickle=False) as z:
            loss_in, loss_null = z["loss_in"], z["loss_null"]
        res = lidp_audit(loss_in, loss_null, delta=lp.delta, beta=lp.beta, order=lp.order, method=lp.method,
                         tune_fraction=lp.tune_fraction, n_thresholds=lp.tau_quantiles,
                         rng=rng_for(params.base.seed, "lidp", name))
        claimed = json.loads((args.defenders / name / "info.json").read_text()).get("claimed_epsilon")
        res["violation"] = bool(claimed is not None and res["eps_lower_bound"] > claimed)
        audit[name] = {"claimed_epsilon": claimed, "game3": game3[name], "lidp": res}
        print(f"lidp: {name}: eps_hat={res['eps_lower_bound']:.3f} (K={res['canaries']}, order {lp.order} "
              f"{lp.method}), K=1 view {res['eps_lower_bound_k1']:.3f}, claimed eps {claimed}")
    write_json(args.out, audit)


if __name__ == "__main__":
    sys.exit(run_stage("lidp", _args, _body))
