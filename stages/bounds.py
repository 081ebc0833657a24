"""Stage bounds: theoretical MI accuracy bounds for claimed ε → ``metrics/bounds.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import ensure_writable, read_json, write_json
from privaudit.bounds import compute_bounds
from privaudit.config import Params
from privaudit.validation import check_defender_dirs, validate_metrics
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--ltu", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--out", type=Path, default=Path("metrics/bounds.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Thudi/Yeom/Erlingsson/Sablayrolles bounds and Izzo's eta next to the LTU accuracy."""
    ensure_writable(args.out)
    check_defender_dirs(args.defenders, [d.name for d in params.defenders])  # model files are data, not code
    infos = {d.name: read_json(args.defenders / d.name / "info.json") for d in params.defenders}
    ltu = read_json(args.ltu)
    validate_metrics("ltu", ltu)  # input
    bounds = compute_bounds(infos, ltu, params.bounds.p_member)
    validate_metrics("bounds", bounds)  # output, before it is written
    write_json(args.out, bounds)
    for name, row in bounds.items():
        print(f"bounds: {name}: thudi={row['thudi']} empirical={row['empirical_accuracy']}")


if __name__ == "__main__":
    sys.exit(run_stage("bounds", _args, _body))
