"""Stage game3: Game-3 ε interval per audited defender → ``data/audit/game3.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import ensure_writable, write_json
from privaudit.config import Params
from privaudit.game3_audit import audit_game3
from privaudit.validation import validate_metrics
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--canaries", type=Path, default=Path("data/canaries"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("data/audit/game3.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Abstaining Game-3 adversary; Clopper-Pearson and ACGR ε intervals (Malek et al. App. B) at each
    defender's share of gate.beta and its claim's δ for a label change (group privacy for add/remove claims)."""
    ensure_writable(args.out)
    g, names = params.game3, [s.name for s in params.audited_defenders()]
    audit = audit_game3(names, canaries_dir=args.canaries, defenders_dir=args.defenders,
                        levels={n: params.error_budget(n).level("game3") for n in names},
                        taus=np.linspace(g.tau_min, g.tau_max, g.tau_steps), tau_selection=g.tau_selection,
                        seed=params.base.seed)
    print("\n".join(audit.lines))
    validate_metrics("audit", {name: {"game3": r} for name, r in audit.results.items()})
    write_json(args.out, audit.results)


if __name__ == "__main__":
    sys.exit(run_stage("game3", _args, _body))
