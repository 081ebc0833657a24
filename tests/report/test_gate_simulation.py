"""Issue 13: honest mechanisms of known (ε, δ) through the gate's own code path.

The fast version of ``benchmarks/bench_gate_false_alarms.py``: the gate may flag a claim that
holds at most ``gate.beta`` of the time (plus binomial noise).
"""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.testing.gate_simulation import GateScenario, simulate_gate

SCENARIOS = [
    (GateScenario("gaussian add/remove", "gaussian", 1.0, 1e-5), 30),
    (GateScenario("gaussian claim delta 1e-2", "gaussian", 1.0, 1e-2), 30),
    (GateScenario("gaussian replace-one audit", "gaussian", 1.0, 1e-5, audit_neighbourhood="replace_one"), 30),
    (GateScenario("RR C=3", "randomized_response", 1.0, 0.0, "replace_label", "replace_label",
                  trials=200, classes=3), 500),
    (GateScenario("RR C=10", "randomized_response", 2.0, 0.0, "replace_label", "replace_label",
                  trials=200, classes=10), 500),
    (GateScenario("RR C=3 vs add/remove claim", "randomized_response", 0.5, 1e-5, "add_remove", "replace_label",
                  trials=200, classes=3), 500),
]


@pytest.mark.parametrize(("scenario", "reps"), SCENARIOS, ids=[s.name for s, _ in SCENARIOS])
def test_false_violation_rate_within_budget(scenario: GateScenario, reps: int) -> None:
    sim = simulate_gate(scenario, reps, np.random.default_rng(2026), beta=0.05)
    assert sim.rate <= sim.binomial_limit(), (scenario.name, sim.rate, sim.false_violations, reps)
