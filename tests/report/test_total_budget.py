"""``gate.total_budget``: the gate composes the earlier releases of the data set with each candidate.

A ledger that a second release exhausts fails the candidate, naming the composed ε, the budget and the
releases; a candidate without a DP claim fails under a budget; ``gate.total_budget: null`` changes nothing
(the committed ``metrics/gate.json`` is recomputed byte for byte through the report stage's path).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from privaudit.artifacts import dumps_json
from privaudit.claims.ledger import LedgerAudit, LedgerClaim, LedgerDataset, Release
from privaudit.config import GateParams, TotalBudget, load_params, parse_params
from privaudit.report.sections import build_document
from privaudit.report.stage import ReportPlan, read_releases
from privaudit.verdict.gate import evaluate_gate
from privaudit.verdict.metrics_files import parse_gate, read_metrics
from privaudit.verdict.total_budget import LedgerContext
from tests.report import synthetic

ROOT = Path(__file__).resolve().parents[2]
BUDGET = TotalBudget(epsilon=1.5, delta=1e-5)


def release(name: str, epsilon: float = 1.0, delta: float = 1e-6, neighbourhood: str = "add_remove",
            identity: str = "digits") -> Release:
    return Release(name=name, defender="dp_sgd", date=datetime(2026, 5, 4, tzinfo=timezone.utc),
                   dataset=LedgerDataset(identity=identity, digest="ab" * 32),
                   claim=LedgerClaim(epsilon=epsilon, delta=delta, neighbourhood=neighbourhood),
                   audit=LedgerAudit(commit="01" * 20, gate_hash="cd" * 32))


def gate(metrics: dict[str, Any], *releases: Release, budget: TotalBudget = BUDGET):
    return evaluate_gate(synthetic.typed(metrics), GateParams(min_privacy=0.0),
                         LedgerContext(budget, "digits", tuple(releases)))


def test_first_release_fits_and_a_second_exhausts_the_budget(metrics: dict[str, Any]) -> None:
    metrics["audit"]["logreg"]["claimed_epsilon"] = 0.3  # both candidates claim: only the budget decides
    first = gate(metrics)
    assert first.defenders["dp_sgd"].passed and first.ledger is not None
    assert first.ledger.spent_epsilon == 0.0 and first.ledger.left_epsilon == 1.5 and first.ledger.releases == ()
    assert first.ledger.defenders["dp_sgd"].within_budget
    assert first.ledger.defenders["dp_sgd"].composed_epsilon == pytest.approx(1.0, abs=1e-3)

    second = gate(metrics, release("dp_sgd-week1"))  # the same recipe released once already: 1 + 1 > 1.5
    verdict = second.defenders["dp_sgd"]
    assert not verdict.passed and not second.passed
    (reason,) = [r for r in verdict.reasons if "total_budget" in r]
    composed = float(re.search(r"composed ε = ([0-9.]+)", reason).group(1))
    assert composed == pytest.approx(2.0, abs=1e-3)
    assert "gate.total_budget ε = 1.5 at δ = 1e-05" in reason and "['dp_sgd-week1']" in reason
    assert reason in second.reasons
    block = second.ledger
    assert block.releases == ("dp_sgd-week1",) and block.spent_epsilon == pytest.approx(1.0, abs=1e-3)
    assert block.left_epsilon == pytest.approx(0.5, abs=1e-3)
    assert block.defenders["logreg"].within_budget  # 1 + 0.3 fits: only the candidate over budget fails
    assert not [r for r in second.defenders["logreg"].reasons if "total_budget" in r]


def test_releases_of_other_people_do_not_count(metrics: dict[str, Any]) -> None:
    """The report stage hands the gate the releases of the audited identity only."""
    from privaudit.claims.ledger import Ledger

    ledger = Ledger(releases=(release("other", identity="patients"), release("ours", epsilon=0.2)))
    ctx_releases = ledger.for_identity("digits")
    result = gate(metrics, *ctx_releases)
    assert result.ledger.releases == ("ours",) and result.defenders["dp_sgd"].passed


def test_a_candidate_without_a_dp_claim_fails_under_a_budget(metrics: dict[str, Any]) -> None:
    result = gate(metrics)
    reasons = result.defenders["logreg"].reasons
    assert any("no DP claim" in r and "unbounded (inf)" in r and "gate.total_budget ε = 1.5" in r for r in reasons)
    assert result.ledger.defenders["logreg"].composed_epsilon is None


def test_neighbourhoods_are_converted_or_refused(metrics: dict[str, Any]) -> None:
    label = gate(metrics, release("label-dp", neighbourhood="replace_label"))
    assert any("label-dp (replace_label)" in r and "cannot be composed" in r for r in label.defenders["dp_sgd"].reasons)
    metrics["audit"]["dp_sgd"]["claimed_neighbourhood"] = "replace_one"
    small = gate(metrics, release("tiny", epsilon=0.1, delta=1e-7), budget=TotalBudget(epsilon=3.0, delta=1e-5))
    # an add/remove release of ε = 0.1 is ε = 0.2 for replace-one (group privacy): 1 + 0.2 fits in 3
    assert small.defenders["dp_sgd"].passed
    assert small.ledger.defenders["dp_sgd"].composed_epsilon == pytest.approx(1.2, abs=1e-3)


def test_the_ledger_block_is_in_the_gate_file_and_read_back(metrics: dict[str, Any]) -> None:
    result = gate(metrics, release("dp_sgd-week1"))
    data = json.loads(dumps_json(result.to_json()))
    assert data["ledger"]["identity"] == "digits" and data["ledger"]["releases"] == ["dp_sgd-week1"]
    assert data["ledger"]["defenders"]["logreg"]["composed_epsilon"] is None  # JSON has no inf
    assert parse_gate(data) == result
    from privaudit.validation import validate_metrics

    validate_metrics("gate", data)


def test_without_a_budget_the_gate_is_unchanged(metrics: dict[str, Any]) -> None:
    plain = evaluate_gate(synthetic.typed(metrics), GateParams())
    assert evaluate_gate(synthetic.typed(metrics), GateParams(), None) == plain
    assert "ledger" not in plain.to_json()


def test_a_null_budget_recomputes_the_committed_gate_byte_for_byte(tmp_path: Path) -> None:
    """``gate.total_budget: null`` (params.yaml): the report stage's path — plan, ledger read, gate — gives the
    committed ``metrics/gate.json`` (provenance block aside, which the stage stamps after), even with releases
    in the ledger."""
    params = load_params(ROOT / "params.yaml")
    assert params.gate.total_budget is None and params.dataset.identity is None
    plan = ReportPlan.of(params)
    ledger = tmp_path / "releases.yaml"
    ledger.write_text("version: 1\nreleases: []\n", encoding="utf-8")
    from privaudit.claims.ledger import append_release

    append_release(ledger, release("dpsgd_eps1-week1"))
    releases = read_releases(ledger, plan)
    assert [r.name for r in releases] == ["dpsgd_eps1-week1"]
    metrics = read_metrics(ROOT / "metrics/ltu.json", ROOT / "metrics/audit.json", ROOT / "metrics/bounds.json")
    result = evaluate_gate(metrics, plan.gate, None if plan.total_budget is None else
                           LedgerContext(plan.total_budget, plan.data_identity(), releases))
    committed = (ROOT / "metrics/gate.json").read_text(encoding="utf-8")
    assert dumps_json({**result.to_json(), "provenance": json.loads(committed)["provenance"]}) == committed


def test_identity_defaults_to_the_data_source() -> None:
    base = {"defenders": [{"name": "a", "kind": "logistic_regression"}]}
    assert parse_params(base).dataset.data_identity() == "digits"
    csv = {**base, "dataset": {"name": "csv", "path": "data/external/p.csv", "label_column": "y"}}
    assert parse_params(csv).dataset.data_identity() == "csv:data/external/p.csv"
    named = {**base, "dataset": {"name": "csv", "path": "data/external/p2.csv", "label_column": "y",
                                 "identity": "patients"}}
    assert parse_params(named).dataset.data_identity() == "patients"


@pytest.mark.parametrize(("budget", "key"), [({"epsilon": 0, "delta": 1e-5}, "gate.total_budget.epsilon"),
                                             ({"epsilon": 1, "delta": 1.0}, "gate.total_budget.delta"),
                                             ({"epsilon": 1}, "gate.total_budget.delta"),
                                             ({"epsilon": math.inf, "delta": 0}, "gate.total_budget.epsilon")])
def test_a_bad_budget_is_refused_naming_the_key(budget: dict[str, Any], key: str) -> None:
    from privaudit.config import ParamsError

    with pytest.raises(ParamsError, match=re.escape(key)):
        parse_params({"defenders": [{"name": "a", "kind": "logistic_regression"}], "gate": {"total_budget": budget}})


def test_the_report_shows_the_ledger_the_composed_epsilon_and_what_is_left(metrics: dict[str, Any]) -> None:
    from privaudit.report.document import Note, Table

    result = gate(metrics, release("dp_sgd-week1"))
    inputs = synthetic.report_inputs()
    inputs = type(inputs)(**{**inputs.__dict__, "gate": result, "releases": (release("dp_sgd-week1"),)})
    sections = {s.title: s for s in build_document(inputs, {})}
    section = sections["Privacy budget over releases"]
    notes = " ".join(b.text for b in section.blocks if isinstance(b, Note))
    assert "spent by the releases so far (composed): ε = 1.000" in notes and "left: ε = 0.500" in notes
    tables = [b for b in section.blocks if isinstance(b, Table)]
    assert tables[0].rows[0][0].lines == ["dp_sgd-week1"]
    assert [r[0].lines[0] for r in tables[1].rows] == ["logreg", "dp_sgd"]
    plain = synthetic.report_inputs()
    assert "Privacy budget over releases" not in {s.title for s in build_document(plain, {})}


def test_a_budget_delta_the_releases_use_up_is_named(metrics: dict[str, Any]) -> None:
    """Bare claims' δ add up: two releases at δ = 1e-5 leave no finite ε at a budget δ of 1e-5."""
    result = gate(metrics, release("a", delta=1e-5), release("b", delta=1e-5), budget=TotalBudget(epsilon=10.0, delta=1e-5))
    (reason,) = [r for r in result.defenders["dp_sgd"].reasons if "total_budget" in r]
    assert "composed ε = inf" in reason and "the composition's own δ exceeds it" in reason
    assert result.ledger.spent_epsilon is None and result.ledger.left_epsilon is None
    wider = gate(metrics, release("a", delta=1e-5), release("b", delta=1e-5), budget=TotalBudget(epsilon=10.0, delta=1e-4))
    assert wider.defenders["dp_sgd"].passed and wider.ledger.left_epsilon == pytest.approx(8.0, abs=0.1)
