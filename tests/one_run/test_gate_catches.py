"""Issue 14: a plain user trainer (no hook) claiming ε = 1 without clipping or without noise fails the
gate black-box, through the pipeline's own function (``privaudit.audits.one_run.run`` on a ``kind: python`` spec);
the correct recipe passes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from privaudit.audits import one_run
from privaudit.verdict.entry import assemble_entry
from privaudit.audits.protocol import AuditInputs, AuditRequest, DefenderData, settings_from
from privaudit.claims.claim import PrivacyClaim
from privaudit.config import GateParams, OneRunParams
from privaudit.defenders.registry import validate_defender_spec
from privaudit.claims.error_budget import applicable_bounds, plan_budget
from privaudit.verdict.metrics_files import AuditMetrics
from privaudit.verdict.gate import evaluate_gate

LTU = {"privacy": 1.0, "privacy_stderr": 0.0, "utility": 1.0, "utility_stderr": 0.0, "accuracy": 0.5,
       "rounds": 100, "attacker": "none"}


@pytest.mark.parametrize(("target", "fails"), [("train_correct", False), ("train_no_clip", True),
                                               ("train_no_noise", True)])
def test_one_run_gate_on_plain_user_trainers(target: str, fails: bool) -> None:
    X, y = load_digits(return_X_y=True)
    X = ((X - X.mean(0)) / np.maximum(X.std(0), 1e-12)).astype(np.float32)
    X, y = X[::2], y[::2].astype(np.int64)  # ~900 training rows, like the default Defender set
    spec = validate_defender_spec({"name": "user", "kind": "python", "claimed_epsilon": 1.0, "claimed_delta": 1e-5,
                                   "target": f"src/privaudit/testing/planted/blackbox_trainers.py:{target}"})
    budget = plan_budget(0.05, ["one_run"], applicable_bounds(observable=False, canary_audited=False, theory=False))
    claim = PrivacyClaim(1.0, 1e-5, "add_remove")
    request = AuditRequest(spec=spec, claim=claim, level=budget.level("one_run"), default_delta=1e-5, seed=3)
    block = one_run.run(request, AuditInputs(defender_data=DefenderData(X, y, 10)), settings_from(one_run.SETTINGS, OneRunParams())).block()
    entry = assemble_entry({"claimed_epsilon": 1.0, "claimed_delta": 1e-5}, budget, name="user", audited=False,
                           blocks={"one_run": block})
    gate = evaluate_gate(AuditMetrics.parse({"user": LTU}, {"user": entry}, {}),
                         GateParams(bounds=["one_run"], fail_on_theory_violation=False))
    assert gate.passed is not fails, (block["eps_lower_bound"], gate.reasons)
    if fails:
        assert any("one_run.eps_lower_bound" in r for r in gate.reasons)
