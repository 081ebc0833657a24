"""The game3 stage's library half: the Game-3 ε interval of every audited defender (Malek et al. 2021, App. B).

:func:`audit_game3` reads each defender's Game-3 canary statistics (``<canaries>/<name>/game3.npz``,
validated by the GX ``canaries`` suite) and its claim, and runs the abstaining adversary
:func:`privaudit.attacks.game3.game3_audit` at the defender's share of ``gate.beta`` and the
claim's δ for a label change (group privacy for add/remove claims).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.attacks.game3 import game3_audit
from privaudit.audit_metrics import audit_delta, read_claim
from privaudit.seeding import rng_for
from privaudit.validation import validate_canary_stats

__all__ = ["Game3Audit", "audit_game3", "load_game3_stats"]


def load_game3_stats(path: Path) -> dict[str, np.ndarray]:
    """The Game-3 statistics of one defender (``canary_index``, ``true_label``, ``label_pair``, ``bit``, ``proba``)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run the canaries stage)")
    with np.load(path, allow_pickle=False) as z:
        run = {k: z[k] for k in z.files}
    validate_canary_stats("game3", run)  # GX suite 'canaries' on the input
    return run


@dataclass(frozen=True)
class Game3Audit:
    """``data/audit/game3.json`` (``results`` per defender) and one summary line per defender and run."""

    results: dict[str, dict[str, Any]]
    lines: list[str]


def audit_game3(
    names: Sequence[str], *, canaries_dir: Path, defenders_dir: Path, levels: Mapping[str, float],
    taus: np.ndarray, tau_selection: str, seed: int,
) -> Game3Audit:
    """Game-3 intervals of the defenders ``names``; ``levels[name]`` is its share of ``gate.beta``.

    ``taus`` is the abstention grid (``game3.tau_min..tau_max``), ``tau_selection`` how τ is chosen;
    each defender draws from ``rng_for(seed, "game3", name)``.
    """
    results: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    for name in names:
        run = load_game3_stats(canaries_dir / name / "game3.npz")
        claim = read_claim(defenders_dir, name)
        level = levels[name]
        delta = audit_delta(claim, "replace_label", 0.0)
        # eps_low is one-sided at alpha/2 of the two-sided interval: alpha = 2 x the budget share
        r = game3_audit(run, taus, 2.0 * level, rng_for(seed, "game3", name), tau_selection, delta=delta)
        if run["proba"].shape[1] == 2:
            # C = 2: the label-flip game (privaudit.canaries.batched_runs.game3_draw) has no C - 2
            # alternative labels, so ACGR does not exist: reported as null
            r["acgr"] = None
        r.update(level=level, delta=delta, neighbourhood="replace_label")
        results[name] = r
        acgr = (f"ACGR [{r['acgr']['eps_low']:.3f}, {r['acgr']['eps_high']:.3f}]" if r["acgr"] is not None
                else "ACGR n/a (2 classes: label-flip game)")
        lines.append(f"game3: {name}: eps in [{r['eps_low']:.3f}, {r['eps_high']:.3f}] (CP, tau={r['tau']:.2f}), {acgr}")
        lines += [f"game3: {name}: run {i}: eps in [{pr['eps_low']:.3f}, {pr['eps_high']:.3f}]"
                  for i, pr in enumerate(r.get("per_run", []))]
    return Game3Audit(results, lines)
