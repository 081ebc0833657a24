"""Stage one_run: one-run black-box audit (input-space canaries) of every defender → ``data/audit/one_run.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import ensure_writable, write_json
from privaudit.audit_metrics import read_claim
from privaudit.config import Params
from privaudit.determinism import configure_determinism
from privaudit.features import resolve_device
from privaudit.seeding import int_seed
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("data/audit/one_run.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Steinke et al. one-run audit with canary rows any trainer accepts, at the defender's own delta and budget."""
    ensure_writable(args.out)
    device = resolve_device(params.base.device)
    configure_determinism(device)
    from privaudit.audit_blocks import one_run_block
    from privaudit.features.feature_set import load_feature_set

    fs = load_feature_set(args.features, args.split)
    X, y = fs.defender
    out = {}
    for spec in params.defenders:
        name = spec.name
        claim = read_claim(args.defenders, name)
        out[name] = one_run_block(spec, X, y, fs.n_classes, claim=claim,
                                  level=params.error_budget(name).level("one_run"),
                                  seed=int_seed(params.base.seed, "one_run", name), default_delta=params.lidp.delta,
                                  canaries=params.one_run.canaries, device=device)
        b = out[name]
        print(f"one_run: {name}: eps_hat={b['eps_lower_bound']:.3f} at delta={b['delta']:.3g} "
              f"({b['correct']}/{b['guesses']} guesses right, {b['canaries']} canaries); "
              f"claimed {claim.epsilon if claim else None}")
    write_json(args.out, out)


if __name__ == "__main__":
    sys.exit(run_stage("one_run", _args, _body, torch_threads=1))
