"""Stage whitebox: white-box DP-SGD audit of every observable defender → ``data/audit/whitebox.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import ensure_writable, write_json
from privaudit.audit_metrics import read_claim
from privaudit.config import Params
from privaudit.defenders.registry import spec_is_observable
from privaudit.determinism import configure_determinism
from privaudit.features import resolve_device
from privaudit.seeding import int_seed
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("data/audit/whitebox.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Gradient canary + noise observed in each DP-SGD step (privaudit.hooks), at the defender's own delta and budget."""
    ensure_writable(args.out)
    device = resolve_device(params.base.device)
    configure_determinism(device)
    from privaudit.audit_blocks import whitebox_block
    from privaudit.features.feature_set import load_feature_set

    fs = load_feature_set(args.features, args.split)
    X, y = fs.defender
    out = {}
    for spec in (s for s in params.defenders if spec_is_observable(s)):
        name = spec.name
        claim = read_claim(args.defenders, name)
        out[name] = whitebox_block(spec, X, y, fs.n_classes, claim=claim,
                                   level=params.error_budget(name).level("whitebox"), runs=params.whitebox.runs,
                                   seed=int_seed(params.base.seed, "whitebox", name), default_delta=params.lidp.delta,
                                   canary_scale=params.whitebox.canary_scale, device=device)
        b = out[name]
        print(f"whitebox: {name}: eps_hat={b['eps_lower_bound']:.4g} at delta={b['delta']:.3g} "
              f"({b['runs']} runs, {b['steps']} steps; claimed {claim.epsilon if claim else None}); "
              f"checks {'passed' if not b['failed_checks'] else 'FAILED: ' + '; '.join(b['failed_checks'])}")
    write_json(args.out, out)


if __name__ == "__main__":
    sys.exit(run_stage("whitebox", _args, _body, torch_threads=1))
