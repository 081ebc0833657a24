"""Stage bounds: theoretical MI accuracy bounds for claimed ε → ``metrics/bounds.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import ensure_writable, write_json
from privaudit.defenders.info_file import check_defender_files, read_defender_info
from privaudit.verdict.theory import compute_bounds
from privaudit.config import Params
from privaudit.verdict.metrics_files import read_entries
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--ltu", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--out", type=Path, default=Path("metrics/bounds.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Thudi/Yeom/Erlingsson/Sablayrolles bounds and Izzo's eta next to the LTU accuracy; exceeds_theory by the
    gate's theory check at the defender's share of gate.beta."""
    from privaudit.validation import validate_metrics  # pandas and Great Expectations: only when it validates

    ensure_writable(args.out)
    check_defender_files(args.defenders, [d.name for d in params.defenders])  # model files are data, not code
    infos = {d.name: read_defender_info(args.defenders, d.name) for d in params.defenders}
    claims = {name: info.claim for name, info in infos.items()}
    etas = {name: info.mip_eta for name, info in infos.items()}  # an η-MIP recipe (kind: mip) claims η, not ε
    ltu = read_entries("ltu", args.ltu, contract=True)  # input: GX contract, then typed
    plan = params.budget_plan()
    levels = {d.name: plan.budget(d.name).levels.get("theory", params.gate.beta) for d in params.defenders}
    bounds = compute_bounds(claims, ltu, params.bounds.p_member, levels=levels, use_error_bars=params.gate.use_error_bars,
                            mip_etas=etas)
    validate_metrics("bounds", bounds)  # output, before it is written
    write_json(args.out, bounds)
    for name, row in bounds.items():
        print(f"bounds: {name}: thudi={row['thudi']} empirical={row['empirical_accuracy']}")


if __name__ == "__main__":
    sys.exit(run_stage("bounds", _args, _body))
