"""The plan stage's outputs, written and read in one place.

``data/plan/sizes.json``: the black-box runs per side the canaries stage runs, from the params only (no
times, no ``ltu.*``: its bytes change only when the canary audit's sizes do, so the canaries stage, which
depends on it, never reruns for an LTU experiment or a different timing history). ``data/plan/checked.json``: constant — the budget
was checked; the other expensive stages depend on it only so that DVC runs them after the plan stage.
"""

from __future__ import annotations

from pathlib import Path

from collections.abc import Mapping

from privaudit.artifacts import read_json, write_json

__all__ = ["read_sized_runs", "write_plan_files"]


def write_plan_files(out_dir: Path, runs_per_side: Mapping[str, int]) -> None:
    """Write ``sizes.json`` (``runs_per_side``: black-box runs per side by defender, from the params) and
    ``checked.json`` into ``out_dir`` (the stage's temporary directory)."""
    write_json(Path(out_dir) / "sizes.json", {"format": 2, "blackbox_runs_per_side": dict(sorted(runs_per_side.items()))})
    write_json(Path(out_dir) / "checked.json", {"format": 1, "checked": "compute.budget_minutes"})


def read_sized_runs(plan_dir: Path) -> dict[str, int]:
    """``sizes.json``'s black-box runs per side by defender (ValueError naming the file when invalid)."""
    path = Path(plan_dir) / "sizes.json"
    raw = read_json(path)
    runs = raw.get("blackbox_runs_per_side") if isinstance(raw, dict) else None
    if not isinstance(runs, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                             for v in runs.values()):
        raise ValueError(f"{path} has no valid blackbox_runs_per_side; rerun the plan stage (dvc repro plan)")
    return {str(k): int(v) for k, v in runs.items()}
