"""A trainer whose outputs give non-finite or extreme scores ends as NOT AUDITED, naming the defender and the
audit: never a traceback, never PASS.

The canaries stage keeps such scores out of the statistics files and records why in ``meta.json``; the
audit that needs them records ``{"not_audited": reason}`` for the defender (the other defenders are audited
as usual); the merge puts the reason in the entry's ``not_audited``; the gate fails the defender with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privaudit.canaries.stats_files import SCORE_LIMIT, UnusableScores, read_canary_stats, unusable_reason
from privaudit.verdict.entry import assemble_entry
from privaudit.verdict.gate import NOT_AUDITED
from tests.report import synthetic


@pytest.mark.parametrize("bad, found", [(np.nan, "not finite (nan)"), (np.inf, "not finite (inf)"),
                                        (-np.inf, "not finite (inf)"), (1e300, "exceed 1e+100")])
def test_the_reason_names_the_defender_the_experiment_and_what_was_found(bad: float, found: str) -> None:
    scores = np.array([0.3, -1.2, bad, 0.8])
    reason = unusable_reason({"score": scores, "included": np.array([1, 0, 1, 0])}, "blackbox", "mine")
    assert reason is not None and reason.startswith("defender 'mine': 1 of 4 blackbox scores ") and found in reason
    assert "\n" not in reason
    assert unusable_reason({"score": np.array([0.3, -SCORE_LIMIT])}, "blackbox", "mine") is None  # the limit is kept


def test_a_statistics_file_the_canaries_stage_found_unusable_raises(tmp_path: Path) -> None:
    folder = tmp_path / "canaries" / "mine"
    folder.mkdir(parents=True)
    reason = "defender 'mine': 3 of 40 blackbox scores are not finite (nan): its predict_proba returned no probabilities"
    (folder / "meta.json").write_text(json.dumps({"unusable": {"blackbox": reason}}))
    with pytest.raises(UnusableScores, match="3 of 40 blackbox scores"):
        read_canary_stats(folder / "blackbox.npz", "blackbox")
    with pytest.raises(FileNotFoundError):  # an experiment not named there is simply missing
        read_canary_stats(folder / "lidp.npz", "lidp")


def test_the_canaries_stage_keeps_unusable_scores_out_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from privaudit.canaries import assembly

    fp = np.array("fp")
    shards = {"blackbox": {"score": np.array([0.1, np.nan]), "included": np.array([1, 0], np.int8), "inputs_fingerprint": fp},
              "lidp": {"loss_in": np.array([0.2, 1e300]), "loss_null": np.array([0.4, 0.5]), "inputs_fingerprint": fp},
              "game3": {"proba": np.array([[0.5, np.inf]]), "bit": np.array([[1]]), "inputs_fingerprint": fp}}
    monkeypatch.setattr(assembly, "load_shard", lambda root, plan, s: shards[s.experiment])

    class Shard:
        def __init__(self, experiment: str) -> None:
            self.defender, self.experiment = "mine", experiment

    assembly.write_defender_outputs(tmp_path, tmp_path, plan=None,  # type: ignore[arg-type]
                                    shards_planned=[Shard(e) for e in shards], name="mine", meta={}, fingerprint="fp")
    meta = json.loads((tmp_path / "mine" / "meta.json").read_text())
    assert meta["unusable"]["blackbox"].startswith("defender 'mine': 1 of 2 blackbox scores are not finite (nan)")
    assert meta["unusable"]["lidp"].startswith("defender 'mine': 1 of 2 lidp loss_in values exceed 1e+100")
    assert meta["unusable"]["game3"].startswith("defender 'mine': 1 of 2 game3 probabilities are not finite (inf)")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["meta.json"]  # no statistics file
    out = capsys.readouterr().out
    assert all(f"the {e} audit of 'mine' will be NOT AUDITED" in out for e in shards)


@pytest.mark.parametrize("claimed", [1.0, None])
def test_an_audit_that_could_not_run_fails_the_defender_as_not_audited(claimed: float | None) -> None:
    """Claim or no claim: what the audit would have shown is unknown, so the gate cannot pass the defender."""
    metrics = synthetic.metrics()
    name = "dp_sgd" if claimed is not None else "logreg"
    reason = "defender 'x': 5 of 40 blackbox scores are not finite (nan): its predict_proba returned no probabilities"
    metrics["audit"][name]["not_audited"] = {"blackbox": reason}
    gate = synthetic.gate_of(metrics).to_json()
    reasons = gate["defenders"][name]["reasons"]
    assert not gate["passed"] and not gate["defenders"][name]["passed"]
    assert f"{name}: the blackbox audit could not run: {reason} {NOT_AUDITED}" in reasons
    assert not any("missing from metrics/audit.json" in r for r in reasons)  # named once, with its reason


def test_the_merge_moves_a_not_audited_block_into_the_entry() -> None:
    from privaudit.config import Params
    from privaudit.verdict.metrics_files import AuditEntry, parse_entry

    params = Params.model_validate({"defenders": [{"name": "mine", "kind": "logistic_regression"}]})
    budget = params.budget_plan().budget("mine")
    reason = "defender 'mine': 2 of 40 blackbox scores exceed 1e+100 in magnitude (largest 1e+300)"
    entry = assemble_entry({"claimed_epsilon": None}, budget, name="mine", audited=True,
                           blocks={"blackbox": {"not_audited": reason}})
    assert entry["blackbox"] is None and entry["not_audited"] == {"blackbox": reason}
    assert parse_entry(AuditEntry, entry, "audit.mine").not_audited == {"blackbox": reason}
