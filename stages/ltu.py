"""Stage ltu: LTU attackers against every defender → ``metrics/ltu.json`` + per-sample scores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.attacks.ltu import evaluate_defender, strongest
from privaudit.config import Params
from privaudit.defenders.training import read_defender_outputs
from privaudit.seeding import rng_for
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--metrics", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--out", type=Path, default=Path("data/ltu"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Play ltu.rounds LTU rounds per attacker; Eq. 1 privacy and Eq. 2 utility per defender."""
    ensure_writable(args.metrics, args.out)
    metrics = {}
    with atomic_dir(args.out) as tmp:
        for spec in params.defenders:
            name = spec["name"]
            outputs, info = read_defender_outputs(args.defenders / name)
            rng = rng_for(params.base.seed, "ltu", name)
            results, scores = evaluate_defender(outputs, params.ltu.rounds, list(params.ltu.attackers), rng)
            best = strongest(results)
            metrics[name] = {
                **best.as_dict(),
                "utility": info["utility"],
                "utility_stderr": info["utility_stderr"],
                "attackers": {a: r.as_dict() for a, r in results.items()},
            }
            scores.to_parquet(tmp / f"{name}.scores.parquet", index=False)
            print(f"ltu: {name}: A_ltu={best.accuracy:.3f} privacy={best.privacy:.3f}±{best.privacy_stderr:.3f} "
                  f"({best.attacker}), utility={info['utility']:.3f}")
    write_json(args.metrics, metrics)


if __name__ == "__main__":
    sys.exit(run_stage("ltu", _args, _body))
