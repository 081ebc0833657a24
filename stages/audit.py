"""Stage audit: merge the audits' results (``data/audit/<audit>.json``) into ``metrics/audit.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import ensure_writable, read_json, write_json
from privaudit.defenders.info_file import read_defender_info
from privaudit.claims.registry import block_audits
from privaudit.verdict.entry import merge_audit_blocks
from privaudit.config import Params
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=Path("data/audit"), help="folder of the audits' <audit>.json")
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("metrics/audit.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Every registered audit's blocks, the claim, the budget split and the gated violations, per defender."""
    from privaudit.validation import validate_metrics  # pandas and Great Expectations: only when it validates

    ensure_writable(args.out)
    built = merge_audit_blocks(
        [s.name for s in params.defenders], audited={s.name for s in params.audited_defenders()},
        plan=params.budget_plan(),
        infos={s.name: dict(read_defender_info(args.defenders, s.name).raw) for s in params.defenders},
        blocks={a.name: read_json(args.results / f"{a.name}.json") for a in block_audits()})
    print("\n".join(built.lines))
    validate_metrics("audit", built.entries)
    write_json(args.out, built.entries)


if __name__ == "__main__":
    sys.exit(run_stage("audit", _args, _body))
