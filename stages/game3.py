"""Stage game3: Game-3 ε interval per audited defender → ``data/audit/game3.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import ensure_writable, write_json
from privaudit.audit_metrics import audit_delta, read_claim
from privaudit.attacks.game3 import game3_audit
from privaudit.config import Params
from privaudit.seeding import rng_for
from privaudit.validation import validate_canary_stats, validate_metrics
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--canaries", type=Path, default=Path("data/canaries"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("data/audit/game3.json"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Abstaining Game-3 adversary; Clopper-Pearson and ACGR ε intervals (Malek et al. App. B) at each
    defender's share of gate.beta and its claim's δ for a label change (group privacy for add/remove claims)."""
    ensure_writable(args.out)
    g = params.game3
    taus = np.linspace(g.tau_min, g.tau_max, g.tau_steps)
    result = {}
    for spec in params.audited_defenders():
        name = spec.name
        path = args.canaries / name / "game3.npz"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (run the canaries stage)")
        with np.load(path, allow_pickle=False) as z:
            run = {k: z[k] for k in z.files}
        validate_canary_stats("game3", run)  # GX suite 'canaries' on the input
        claim = read_claim(args.defenders, name)
        level = params.error_budget(name).level("game3")
        delta = audit_delta(claim, "replace_label", 0.0)
        # eps_low is one-sided at alpha/2 of the two-sided interval: alpha = 2 x the budget share
        result[name] = game3_audit(run, taus, 2.0 * level, rng_for(params.base.seed, "game3", name),
                                   g.tau_selection, delta=delta)
        if run["proba"].shape[1] == 2:
            # C = 2: the label-flip game (privaudit.canaries.batched_runs.game3_draw) has no C - 2
            # alternative labels, so ACGR does not exist: reported as null
            result[name]["acgr"] = None
        result[name].update(level=level, delta=delta, neighbourhood="replace_label")
        r = result[name]
        acgr = (f"ACGR [{r['acgr']['eps_low']:.3f}, {r['acgr']['eps_high']:.3f}]" if r["acgr"] is not None
                else "ACGR n/a (2 classes: label-flip game)")
        print(f"game3: {name}: eps in [{r['eps_low']:.3f}, {r['eps_high']:.3f}] (CP, tau={r['tau']:.2f}), {acgr}")
        for i, pr in enumerate(r.get("per_run", [])):
            print(f"game3: {name}: run {i}: eps in [{pr['eps_low']:.3f}, {pr['eps_high']:.3f}]")
    validate_metrics("audit", {name: {"game3": r} for name, r in result.items()})
    write_json(args.out, result)


if __name__ == "__main__":
    sys.exit(run_stage("game3", _args, _body))
