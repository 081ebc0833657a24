"""The LiDP audit of one defender (privaudit.audits.lidp.run) and the merge of the audits' blocks into
metrics/audit.json entries (privaudit.verdict.entry.merge_audit_blocks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privaudit.audits import lidp
from privaudit.defenders.info_file import read_defender_info
from privaudit.verdict.entry import merge_audit_blocks
from tests.info_files import write_info
from privaudit.audits.lidp import LidpSettings, load_lidp_stats
from privaudit.audits.protocol import AuditInputs, AuditRequest
from privaudit.defenders.specs import validate_defender_spec
from privaudit.claims.error_budget import DEFAULT_GATED, BudgetPlan, applicable_bounds, plan_budget
from privaudit.validation import ValidationFailed

SETTINGS = LidpSettings(order=1, method="wilson", tune_fraction=0.5, pilot_fraction=0.125, tau_quantiles=16, tau_selection="split",
                        neighbourhood="add_remove", canary_type="mislabel")
GAME3 = {"eps_low": 0.0, "eps_high": 3.0, "canaries": 100, "delta": 1e-5, "neighbourhood": "replace_label",
         "level": 0.01}


def _setup(tmp: Path, leak: float, claim: float | None) -> dict:
    write_info(tmp / "def", "d", claimed_epsilon=claim, claimed_delta=None if claim is None else 1e-5,
               claimed_neighbourhood=None if claim is None else "add_remove")
    (tmp / "can" / "d").mkdir(parents=True)
    rng = np.random.default_rng(0)
    # members' losses are lower by `leak` standard deviations than the null canaries'
    np.savez(tmp / "can" / "d" / "lidp.npz", loss_in=rng.normal(-leak, 1, (400, 20)) + 10,
             loss_null=rng.normal(0, 1, (400, 20)) + 10)
    budget = plan_budget(0.05, DEFAULT_GATED, applicable_bounds(observable=False, canary_audited=True, theory=False))
    return dict(audited={"d"}, budget=budget, defenders_dir=tmp / "def", canaries_dir=tmp / "can")


def _build(audited: set[str], budget, defenders_dir: Path, canaries_dir: Path):
    """What the lidp stage (privaudit.audits.runner.run_audit) and the audit stage do, for defender "d"."""
    blocks: dict[str, dict] = {"whitebox": {}, "one_run": {}, "blackbox": {}, "lidp": {}, "game3": {}}
    bound = None
    if "d" in audited:
        request = AuditRequest(spec=validate_defender_spec({"name": "d", "kind": "logistic_regression"}),
                               claim=read_defender_info(defenders_dir, "d").claim, level=budget.level("lidp"), default_delta=1e-5,
                               seed=0)
        bound = lidp.run(request, AuditInputs(canaries_dir=canaries_dir), SETTINGS)
        blocks.update(lidp={"d": bound.block()}, game3={"d": GAME3})
    built = merge_audit_blocks(["d"], audited=audited, plan=BudgetPlan(0.05, {"d": budget}),
                               infos={"d": read_defender_info(defenders_dir, "d").raw}, blocks=blocks)
    return built, bound


def test_a_leaky_recipe_with_a_small_claim_is_a_violation(tmp_path: Path) -> None:
    built, bound = _build(**_setup(tmp_path, leak=3.0, claim=0.1))
    entry = built.entries["d"]
    assert entry["lidp"]["eps_lower_bound"] > 0.1 and entry["violation"] and "lidp" in entry["violations"]
    assert entry["lidp"]["level"] == built.entries["d"]["budget"]["levels"]["lidp"]
    assert bound.epsilon == entry["lidp"]["eps_lower_bound"] and bound.level == entry["lidp"]["level"]
    assert list(bound.table.columns) == ["trials", "eps_k1", "eps_ksqrt"]
    assert built.lines == [f"audit: d: eps lower bounds lidp {entry['lidp']['eps_lower_bound']:.3f}, game3 0.000; "
                           "claimed eps 0.1; violation True"]


def test_no_leak_no_violation_and_same_numbers_for_the_same_seed(tmp_path: Path) -> None:
    kw = _setup(tmp_path, leak=0.0, claim=1.0)
    (a, _), (b, _) = _build(**kw), _build(**kw)
    assert not a.entries["d"]["violation"] and a.entries == b.entries


def test_defenders_without_canary_audits_get_an_entry_without_lidp(tmp_path: Path) -> None:
    kw = _setup(tmp_path, leak=3.0, claim=None)
    built, bound = _build(**{**kw, "audited": set()})
    assert built.entries["d"]["lidp"] is None and built.entries["d"]["audited"] is False and bound is None


def test_corrupt_statistics_are_refused(tmp_path: Path) -> None:
    kw = _setup(tmp_path, leak=0.0, claim=None)
    np.savez(tmp_path / "can" / "d" / "lidp.npz", loss_in=np.full((4, 2), np.nan), loss_null=np.zeros((4, 2)))
    with pytest.raises(ValidationFailed):
        load_lidp_stats(tmp_path / "can" / "d" / "lidp.npz")
    with pytest.raises(FileNotFoundError, match="run the canaries stage"):
        load_lidp_stats(tmp_path / "nowhere.npz")
    with pytest.raises(ValidationFailed):
        _build(**kw)


def test_the_merge_refuses_unregistered_or_missing_audits(tmp_path: Path) -> None:
    kw = _setup(tmp_path, leak=0.0, claim=None)
    plan = BudgetPlan(0.05, {"d": kw["budget"]})
    with pytest.raises(ValueError, match="registered audit"):
        merge_audit_blocks(["d"], audited=set(), plan=plan, infos={"d": read_defender_info(kw["defenders_dir"], "d").raw}, blocks={"whitebox": {}})
    blocks = {"whitebox": {}, "one_run": {}, "blackbox": {}, "lidp": {}, "game3": {}, "mystery": {"d": {"eps_lower_bound": 1.0}}}
    with pytest.raises(ValueError, match="not registered"):
        merge_audit_blocks(["d"], audited=set(), plan=plan, infos={"d": read_defender_info(kw["defenders_dir"], "d").raw}, blocks=blocks)
