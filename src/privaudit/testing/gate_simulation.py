"""Honest mechanisms of known (ε, δ) driven through the release gate: its false-violation rate.

``gate.beta`` promises that a DP claim that holds is flagged with probability at most β. This
module checks the promise by simulation, through the *same code path* the pipeline uses: the
audit functions (:func:`privaudit.audits.lidp.lidp_audit`,
:func:`privaudit.audits.game3.game3_interval`) at the level and δ the error budget assigns,
:func:`privaudit.verdict.entry.assemble_entry`, and :func:`privaudit.verdict.gate.evaluate_gate`.

Mechanisms (the claim holds exactly — the hardest honest case):

* ``gaussian``: the Gaussian sum mechanism of LiDP §4 (unit canaries on a sphere, noise σ from the
  analytic Gaussian mechanism for the claimed (ε, δ), add/remove neighbourhood), audited by LiDP at
  ``audit_neighbourhood`` (``replace_one`` compares with the group guarantee (2ε, (1+e^ε)δ)).
* ``randomized_response``: ε-label-DP randomized response over ``classes`` labels (the released
  "model" puts probability 0.9 on the released label of each canary), audited by Game 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.verdict.entry import assemble_entry
from privaudit.audits.protocol import audit_delta
from privaudit.claims.claim import PrivacyClaim
from privaudit.config import GateParams
from privaudit.claims.error_budget import plan_budget
from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma, simulate_gaussian_scores

__all__ = ["GateScenario", "GateSimulation", "simulate_gate"]


@dataclass(frozen=True)
class GateScenario:
    """One honest mechanism with its claim and the audit that checks it."""

    name: str
    mechanism: Literal["gaussian", "randomized_response"]
    epsilon: float
    delta: float
    claim_neighbourhood: Neighbourhood = Neighbourhood.ADD_REMOVE
    audit_neighbourhood: Neighbourhood = Neighbourhood.ADD_REMOVE
    trials: int = 64  # LiDP trials, or Game 3 canaries
    canaries: int = 8  # LiDP K
    classes: int = 10  # randomized response
    dim: int = 1000
    #: a planted fault for the detector tests: audit at this δ instead of the claim's (issue 13 item 1)
    wrong_audit_delta: float | None = None


@dataclass(frozen=True)
class GateSimulation:
    scenario: GateScenario
    reps: int
    false_violations: int
    beta: float
    gated: tuple[str, ...]

    @property
    def rate(self) -> float:
        return self.false_violations / self.reps

    def binomial_limit(self, sigmas: float = 3.0) -> float:
        """β plus ``sigmas`` binomial standard errors: the most a correct gate should show."""
        return self.beta + sigmas * float(np.sqrt(self.beta * (1 - self.beta) / self.reps))


def _gaussian_blocks(s: GateScenario, claim: PrivacyClaim, level: float, rng: np.random.Generator) -> dict[str, dict]:
    from privaudit.audits.lidp import lidp_audit

    sigma = gaussian_mechanism_sigma(s.epsilon, s.delta)
    sx, sy = simulate_gaussian_scores(sigma, s.trials, s.canaries, s.dim, rng)
    delta = audit_delta(claim, s.audit_neighbourhood, 1e-5)
    if s.wrong_audit_delta is not None:  # planted fault: the bound is then labelled with the claim's δ
        res, _ = lidp_audit(-sx, -sy, delta=s.wrong_audit_delta, level=level, order=1, method="wilson",
                            tune_fraction=0.5, n_thresholds=16, rng=rng, neighbourhood=s.audit_neighbourhood)
        res.update(level=level, delta=delta)
        return {"lidp": res}
    res, _ = lidp_audit(-sx, -sy, delta=delta, level=level, order=1, method="wilson", tune_fraction=0.5,
                        n_thresholds=16, rng=rng, neighbourhood=s.audit_neighbourhood)
    res["level"] = level
    return {"lidp": res}


def _rr_blocks(s: GateScenario, claim: PrivacyClaim, level: float, rng: np.random.Generator) -> dict[str, dict]:
    from privaudit.audits.game3 import game3_interval

    n, c = s.trials, s.classes
    true = rng.integers(c, size=n)
    # two candidate labels different from the true one, and which of them is trained
    off = rng.permuted(np.tile(np.arange(1, c), (n, 1)), axis=1)[:, :2]
    pair = (true[:, None] + off) % c
    bit = rng.integers(2, size=n)
    trained = pair[np.arange(n), bit]
    keep = rng.random(n) < np.exp(s.epsilon) / (np.exp(s.epsilon) + c - 1)
    other = (trained + rng.integers(1, c, size=n)) % c  # uniform over the other C-1 labels
    released = np.where(keep, trained, other)
    proba = np.full((n, c), 0.1 / (c - 1))
    proba[np.arange(n), released] = 0.9
    run = {"proba": proba, "label_pair": pair, "bit": bit, "true_label": true}
    delta = audit_delta(claim, Neighbourhood.REPLACE_LABEL, 0.0)
    res = game3_interval(run, np.linspace(0.5, 0.99, 10), rng, "bonferroni", level=level, delta=delta)
    res.update(neighbourhood=Neighbourhood.REPLACE_LABEL)
    return {"game3": res}


def simulate_gate(scenario: GateScenario, reps: int, rng: np.random.Generator, *, beta: float) -> GateSimulation:
    """Run the honest mechanism ``reps`` times; count how often the gate flags its (true) claim.

    ``beta`` is the gate's total error budget (``gate.beta``), split by :func:`plan_budget` over the
    gated bounds.

    >>> sc = GateScenario("rr", "randomized_response", 1.0, 0.0, "replace_label", "replace_label", trials=100, classes=3)
    >>> sim = simulate_gate(sc, 20, np.random.default_rng(0), beta=0.05)
    >>> sim.reps, sim.gated, sim.rate <= sim.binomial_limit()
    (20, ('game3',), True)
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    claim = PrivacyClaim(scenario.epsilon, scenario.delta, scenario.claim_neighbourhood)
    if scenario.mechanism == "gaussian":
        applicable, gated, run = ("lidp", "lidp_k1"), ["lidp", "lidp_k1"], _gaussian_blocks
    elif scenario.mechanism == "randomized_response":
        applicable, gated, run = ("game3",), ["game3"], _rr_blocks
    else:
        raise ValueError(f"unknown mechanism {scenario.mechanism!r}; use 'gaussian' or 'randomized_response'")
    budget = plan_budget(beta, gated, applicable)
    params = GateParams(beta=beta, bounds=gated, fail_on_theory_violation=False)
    info = {"claimed_epsilon": claim.epsilon, "claimed_delta": claim.delta,
            "claimed_neighbourhood": claim.neighbourhood}
    from privaudit.verdict.metrics_files import AuditMetrics, parse_entries
    from privaudit.verdict.gate import evaluate_gate

    ltu = parse_entries("ltu", {"d": {"privacy": 1.0, "privacy_stderr": 0.0, "utility": 1.0, "utility_stderr": 0.0,
                                      "accuracy": 0.5, "rounds": 100, "attacker": "none"}})

    flagged = 0
    level = budget.level(gated[0])
    for _ in range(reps):
        blocks = run(scenario, claim, level, rng)
        entry = assemble_entry(info, budget, name="d", audited=True, blocks=blocks)
        gate = evaluate_gate(AuditMetrics(ltu=ltu, audit=parse_entries("audit", {"d": entry})), params)
        flagged += int(not gate.passed)
    return GateSimulation(scenario, reps, flagged, beta, tuple(budget.gated))
