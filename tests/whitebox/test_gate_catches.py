"""Issue 14: a DP-SGD recipe that claims ε = 1 but adds no noise (or divides σ by 4, …) fails the release gate.

The planted bugs of ``src/privaudit/testing/planted/opacus_bugs.py`` go through the same path as the pipeline:
white-box audit → ``whitebox`` metrics block → ``assemble_entry`` → ``evaluate_gate``; the gate's
reason names the white-box audit. The correct recipe passes.
"""

from __future__ import annotations

import pytest

from privaudit.audits.whitebox import whitebox_metrics
from privaudit.verdict.entry import assemble_entry
from privaudit.config import GateParams
from privaudit.claims.error_budget import applicable_bounds, plan_budget
from privaudit.verdict.metrics_files import AuditMetrics
from privaudit.verdict.gate import evaluate_gate
from privaudit.audits.whitebox import python_trainer, whitebox_audit
from privaudit.testing.planted.opacus_bugs import CATALOGUE, tiny_data

OPTIONS = {"epsilon": 1.0, "accountant": "gdp"}
LTU = {"privacy": 1.0, "privacy_stderr": 0.0, "utility": 1.0, "utility_stderr": 0.0, "accuracy": 0.5,
       "rounds": 100, "attacker": "none"}


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_gate_fails_every_planted_bug_and_passes_the_correct_recipe(name: str) -> None:
    X, y = tiny_data()
    budget = plan_budget(0.05, ["whitebox"], applicable_bounds(observable=True, canary_audited=False, theory=False))
    res = whitebox_audit(python_trainer(CATALOGUE[name].train, 3, **OPTIONS), X, y, runs=1, delta=1e-5,
                         level=budget.level("whitebox"), accountant="gdp", seed=7)
    claimed = CATALOGUE["correct"].true_epsilon(len(X), **OPTIONS)
    info = {"claimed_epsilon": claimed, "claimed_delta": 1e-5, "claimed_neighbourhood": "add_remove"}
    entry = assemble_entry(info, budget, name=name, audited=False,
                           blocks={"whitebox": whitebox_metrics(res, delta=1e-5, level=budget.level("whitebox"))})
    gate = evaluate_gate(AuditMetrics.parse({name: LTU}, {name: entry}, {}),
                         GateParams(bounds=["whitebox"], fail_on_theory_violation=False))
    if name == "correct":
        assert gate.passed, gate.reasons
    else:
        assert not gate.passed
        assert any("whitebox" in r for r in gate.reasons), gate.reasons
