"""Stage history: append this run's record to ``refs/privaudit/history``; write ``reports/history.html``.

Everything it does is :func:`privaudit.history.stage.run_history`; this file only names the paths. The
last stage, ``always_changed`` and without DVC outputs: every ``dvc repro`` (a scheduled Prefect run
included) records that it ran and what it saw, and ``dvc.lock`` stays the same when nothing changed.
What started the run is read from ``PRIVAUDIT_TRIGGER`` (set by the Prefect flows and ``make audit``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.config import Params
from privaudit.data.sources import DataSourceError, read_source_stamp
from privaudit.history.stage import HistoryPaths, HistoryPlan, run_history
from stages._runner import run_stage

DEFAULTS = HistoryPaths()


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gate", type=Path, default=DEFAULTS.gate)
    p.add_argument("--ltu", type=Path, default=DEFAULTS.ltu)
    p.add_argument("--audit", type=Path, default=DEFAULTS.audit)
    p.add_argument("--bounds", type=Path, default=DEFAULTS.bounds)
    p.add_argument("--environment", type=Path, default=DEFAULTS.environment)
    p.add_argument("--user-code", type=Path, default=DEFAULTS.user_code)
    p.add_argument("--source", type=Path, default=Path("data/source"), help="the ingested data (its identity and digest)")
    p.add_argument("--out", type=Path, default=DEFAULTS.out)
    p.add_argument("--repo", type=Path, default=DEFAULTS.repo)


def _body(args: argparse.Namespace, params: Params) -> None:
    """Record this audit run in the history and write the history page."""
    paths = HistoryPaths(gate=args.gate, ltu=args.ltu, audit=args.audit, bounds=args.bounds,
                         environment=args.environment, user_code=args.user_code, out=args.out,
                         repo=args.repo)
    try:  # the identity and digest the ingest stage stamped (the release ledger reads the same)
        stamp = read_source_stamp(args.source)
        identity, digest = stamp.identity, stamp.digest
    except DataSourceError as exc:
        print(f"history: warning: {exc}; recording no data digest", file=sys.stderr)
        identity, digest = params.dataset.data_identity(), None
    record, regressions = run_history(paths, HistoryPlan.of(params, identity, digest))
    print(f"history: recorded {record.trigger} at {record.when.isoformat()} "
          f"({'PASS' if record.passed else 'FAIL'}) → refs/privaudit/history, {args.out}")
    for regression in regressions:
        print(f"history: REGRESSION {regression.text()}")


if __name__ == "__main__":
    sys.exit(run_stage("history", _args, _body))
