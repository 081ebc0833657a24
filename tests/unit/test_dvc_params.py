"""dvc.yaml lists the params a stage's behaviour depends on, so `dvc exp run -S key=value` reruns it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _params(stage: str) -> set[str]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {p for p in stages[stage].get("params", []) if isinstance(p, str)}


def test_scheduler_is_a_canaries_param() -> None:
    """Issue 15: `-S compute.scheduler=tcp://...` used to rerun nothing, so no work reached the cluster."""
    assert "compute.scheduler" in _params("canaries")


def test_budget_params_rerun_every_audit_that_uses_its_share() -> None:
    # the audit stages, the merge (its budget and violations) and bounds (the theory check's level)
    for stage in ("game3", "lidp", "whitebox", "one_run", "audit", "bounds"):
        assert {"gate.beta", "gate.bounds", "gate.fail_on_theory_violation", "defenders",
                "canaries.defenders"} <= _params(stage), stage
