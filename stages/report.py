"""Stage report: release gate → ``metrics/gate.json``; ``reports/audit.html``, ``audit.md``, plots.

Everything it does is :func:`privaudit.report.stage.run_report`; this file only names the paths.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.config import Params
from privaudit.report.stage import ReportPaths, ReportPlan, run_report
from stages._runner import run_stage

DEFAULTS = ReportPaths()


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ltu", type=Path, default=DEFAULTS.ltu)
    p.add_argument("--ltu-scores", type=Path, default=DEFAULTS.ltu_scores,
                   help="folder with <defender>.scores.parquet and <defender>.roc.json")
    p.add_argument("--curves", type=Path, default=DEFAULTS.curves,
                   help="folder with <defender>.csv (trials, eps_k1, eps_ksqrt)")
    p.add_argument("--audit", type=Path, default=DEFAULTS.audit)
    p.add_argument("--bounds", type=Path, default=DEFAULTS.bounds)
    p.add_argument("--gate", type=Path, default=DEFAULTS.gate)
    p.add_argument("--summary", type=Path, default=DEFAULTS.summary,
                   help="the review-sized metrics file that `dvc metrics diff` shows")
    p.add_argument("--out", type=Path, default=DEFAULTS.out)
    p.add_argument("--repo", type=Path, default=DEFAULTS.repo)
    p.add_argument("--releases", type=Path, default=DEFAULTS.releases,
                   help="the ledger of releases, composed with each candidate under gate.total_budget")


def _body(args: argparse.Namespace, params: Params) -> None:
    """Evaluate the release gate and write the self-contained audit report."""
    paths = ReportPaths(ltu=args.ltu, audit=args.audit, bounds=args.bounds, ltu_scores=args.ltu_scores,
                        curves=args.curves, gate=args.gate, summary=args.summary, out=args.out, repo=args.repo,
                        releases=args.releases)
    gate = run_report(paths, ReportPlan.of(params))
    print(f"report: verdict {'PASS' if gate.passed else 'FAIL'} → {args.out / 'audit.html'}")


if __name__ == "__main__":
    sys.exit(run_stage("report", _args, _body))
