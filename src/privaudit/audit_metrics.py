"""Assemble one defender's entry of ``metrics/audit.json`` from the audits that ran.

The entry holds the claim (``claimed_epsilon``, ``claimed_delta``, ``claimed_neighbourhood``), the
error budget split (``budget``: ``beta``, ``gated``, ``diagnostic``, ``levels``), one block per
audit (``game3``, ``lidp``, ``whitebox``, ``one_run``; each with its ε lower bound, ``delta``,
``neighbourhood`` and ``level``), and ``violation``/``violations`` computed by
:func:`privaudit.claim_check.check_bounds` — the same function the release gate uses, over the
gated bounds only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privaudit.artifacts import read_json
from privaudit.claim_check import audited_bounds, check_bounds, claim_of
from privaudit.claims import PrivacyClaim
from privaudit.error_budget import ErrorBudget
from privaudit.lidp_audit import LidpSettings
from privaudit.metrics_files import AuditEntry, parse_entry
from privaudit.seeding import rng_for
from privaudit.validation import validate_canary_stats

__all__ = ["AuditBuild", "assemble_entry", "audit_delta", "build_audit_metrics", "load_lidp_stats", "read_claim"]


def read_claim(defenders_dir: Path, name: str) -> PrivacyClaim | None:
    """The claim of defender ``name`` from ``<defenders_dir>/<name>/info.json`` (``None``: no ε claimed).

    ``info.json`` carries the same ``claimed_*`` keys as a ``metrics/audit.json`` entry, so it is read
    by :func:`privaudit.claim_check.claim_of`.
    """
    path = defenders_dir / name / "info.json"
    return claim_of(read_json(path), str(path))


def audit_delta(claim: PrivacyClaim | None, neighbourhood: str, default: float) -> float:
    """The δ an audit of ``neighbourhood`` must use to be compared with ``claim``.

    The claim's δ, converted to the audit's neighbourhood (group privacy); ``default``
    (``lidp.delta``) when there is no claim or the claim says nothing about that neighbourhood.
    """
    if claim is None:
        return default
    implied = claim.implied_for(neighbourhood)
    return default if implied is None else implied.delta


def assemble_entry(
    info: Mapping[str, Any],
    budget: ErrorBudget,
    *,
    name: str,
    audited: bool,
    blocks: Mapping[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """One ``metrics/audit.json`` entry.

    Args:
        info: the defender's ``info.json`` (claim).
        budget: its error budget (:meth:`privaudit.config.Params.error_budget`).
        name: defender name (for messages).
        audited: whether the canary audits (Game 3, LiDP) ran for it.
        blocks: ``{"game3": ..., "lidp": ..., "whitebox": ..., "one_run": ...}``; ``None`` = not run.
    """
    claim = claim_of(info, f"data/defenders/{name}/info.json")
    entry: dict[str, Any] = {
        "claimed_epsilon": None if claim is None else claim.epsilon,
        "claimed_delta": None if claim is None else claim.delta,
        "claimed_neighbourhood": None if claim is None else claim.neighbourhood,
        "audited": audited,
        "budget": budget.as_dict(),
    }
    for key in ("game3", "lidp", "whitebox", "one_run"):
        block = blocks.get(key)
        entry[key] = None if block is None else dict(block)
    violations: list[str] = []
    if claim is not None:
        bounds = audited_bounds(parse_entry(AuditEntry, entry, f"audit.{name}"))
        for finding in check_bounds(claim, bounds):
            block = entry[finding.bound.source.split(".")[0]]
            if finding.compared_with is not None:
                block.setdefault("compared_epsilon", {})[finding.bound.kind] = finding.compared_with.epsilon
            if finding.violation and budget.is_gated(finding.bound.kind):
                violations.append(finding.bound.kind)
            block.setdefault("violation", False)
            block["violation"] = bool(block["violation"] or finding.violation)
    entry["violations"] = violations
    entry["violation"] = bool(violations)
    return entry


def load_lidp_stats(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(members' statistics (n, K), null statistics (n, m)) of ``<canaries>/<name>/lidp.npz``, validated.

    Loss statistics (``loss_in``/``loss_null``) or, for gradient canaries, signed inner products
    (``stat_in``/``stat_null``); both are "lower = member" after the canaries stage.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run the canaries stage)")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    validate_canary_stats("lidp", arrays)  # GX suite 'canaries' on the input
    if "loss_in" in arrays:
        return arrays["loss_in"], arrays["loss_null"]
    return arrays["stat_in"], arrays["stat_null"]


@dataclass(frozen=True)
class AuditBuild:
    """What the lidp stage writes: ``metrics/audit.json`` (``entries``), the ε̂-vs-trials curve per audited defender, one line each."""

    entries: dict[str, dict[str, Any]]
    curves: dict[str, pd.DataFrame]
    lines: list[str]

    def write_curves(self, directory: Path) -> None:
        """``<directory>/<defender>.csv`` (columns ``trials, eps_k1, eps_ksqrt``) per audited defender."""
        for name, curve in self.curves.items():
            curve.to_csv(directory / f"{name}.csv", index=False)


def build_audit_metrics(
    names: Sequence[str], *, audited: set[str], budgets: Mapping[str, ErrorBudget], defenders_dir: Path,
    canaries_dir: Path, game3: Mapping[str, Any], extra: Mapping[str, Mapping[str, Any]], lidp: LidpSettings,
    default_delta: float, seed: int,
) -> AuditBuild:
    """Run the LiDP audit of every audited defender and assemble every defender's audit entry.

    Args:
        names: all defenders, in params order; ``audited``: those with canary audits.
        budgets: each defender's error budget (the LiDP bound runs at ``budget.level("lidp")``).
        defenders_dir, canaries_dir: ``data/defenders`` (claims) and ``data/canaries`` (statistics).
        game3: Game-3 results per audited defender; ``extra``: ``{"whitebox": …, "one_run": …}``
            results per defender (missing names: not run).
        lidp: the audit's settings; ``default_delta``: ``lidp.delta`` where no claim gives one.
        seed: ``base.seed`` (each defender's audit draws from ``rng_for(seed, "lidp", name)``).
    """
    entries: dict[str, dict[str, Any]] = {}
    curves: dict[str, pd.DataFrame] = {}
    lines: list[str] = []
    for name in names:
        info = read_json(defenders_dir / name / "info.json")
        budget = budgets[name]
        claim = claim_of(info, f"{defenders_dir / name}/info.json")
        blocks = {key: extra[key].get(name) for key in extra}
        if name in audited:
            loss_in, loss_null = load_lidp_stats(canaries_dir / name / "lidp.npz")
            delta = audit_delta(claim, lidp.neighbourhood, default_delta)
            res, curves[name] = lidp.audit(loss_in, loss_null, delta=delta, beta=budget.level("lidp"),
                                           rng=rng_for(seed, "lidp", name))
            blocks.update(lidp=res, game3=game3[name])
        entries[name] = assemble_entry(info, budget, name=name, audited=name in audited, blocks=blocks)
        shown = ", ".join(f"{k} {b['eps_lower_bound' if 'eps_lower_bound' in b else 'eps_low']:.3f}"
                          for k, b in blocks.items() if b)
        lines.append(f"lidp: {name}: eps lower bounds {shown or 'none'}; claimed eps {info.get('claimed_epsilon')}; "
                     f"violation {entries[name]['violation']}")
    return AuditBuild(entries, curves, lines)
