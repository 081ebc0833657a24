"""Stage ltu: LTU attackers against every defender → ``metrics/ltu.json``, per-sample scores, ROC data."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.config import Params
from privaudit.repro.determinism import configure_determinism
from privaudit.features import resolve_device
from privaudit.features.feature_set import load_feature_set
from privaudit.audits.ltu import ltu_audit
from privaudit.validation import validate_metrics
from stages._ltu import ltu_options
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--metrics", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--out", type=Path, default=Path("data/ltu"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Play ltu.rounds LTU rounds per attacker; Eq. 1 privacy and Eq. 2 utility per defender."""
    lp, device = params.ltu, resolve_device(params.base.device)
    ensure_writable(args.metrics, args.out)
    configure_determinism(device)  # the retrain/LiRA/RMIA reference models train on it
    options, risk = ltu_options(params, device)
    audit = ltu_audit(params.defenders, defenders_dir=args.defenders,
                      features=load_feature_set(args.features, args.split), rounds=lp.rounds, attackers=lp.attackers,
                      options=options, risk=risk, seed=params.base.seed, log=partial(print, flush=True))
    validate_metrics("ltu", audit.metrics)
    with atomic_dir(args.out) as tmp:
        audit.write_outputs(tmp)
    write_json(args.metrics, audit.metrics)


if __name__ == "__main__":
    sys.exit(run_stage("ltu", _args, _body, torch_threads=1))
