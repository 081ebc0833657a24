"""Benchmark: the release gate's false-violation rate on honest mechanisms of known (ε, δ) (issue 13).

Every row drives an honest mechanism (its claim holds exactly) through the pipeline's own code
path — the audit function at the level and δ the error budget assigns, ``assemble_entry`` and
``evaluate_gate`` (see :mod:`privaudit.testing.gate_simulation`) — and counts how often the gate
flags the claim. A correct gate shows a rate ≤ gate.beta within binomial noise. The row marked
"planted fault" audits at the global δ = 1e-5 instead of the claim's δ (the behaviour before
issue 13): it shows what the δ fix removes.

Run:  nice python benchmarks/bench_gate_false_alarms.py [--reps 500] [--out benchmarks/results/gate_false_alarms.txt]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from privaudit.testing.gate_simulation import GateScenario, simulate_gate

#: the gate's total error budget ``gate.beta`` (the default of params.yaml)
BETA = 0.05

SCENARIOS = (
    GateScenario("Gaussian, LiDP add/remove", "gaussian", 1.0, 1e-5),
    GateScenario("Gaussian, LiDP add/remove", "gaussian", 4.0, 1e-5),
    GateScenario("Gaussian, claim delta 1e-2", "gaussian", 1.0, 1e-2),
    GateScenario("Gaussian, LiDP replace-one vs (2eps,(1+e^eps)delta)", "gaussian", 1.0, 1e-5,
                 audit_neighbourhood="replace_one"),
    GateScenario("Gaussian, claim delta 1e-2, K=1, n=20000", "gaussian", 1.0, 1e-2, trials=20000, canaries=1,
                 dim=100),
    GateScenario("planted fault: audited at delta 1e-5", "gaussian", 1.0, 1e-2, trials=20000, canaries=1, dim=100,
                 wrong_audit_delta=1e-5),
    GateScenario("Randomized response C=3, Game 3", "randomized_response", 1.0, 0.0, "replace_label",
                 "replace_label", trials=1000, classes=3),
    GateScenario("Randomized response C=10, Game 3", "randomized_response", 1.0, 0.0, "replace_label",
                 "replace_label", trials=1000, classes=10),
    GateScenario("Randomized response C=3 vs add/remove claim", "randomized_response", 0.5, 1e-5, "add_remove",
                 "replace_label", trials=1000, classes=3),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    lines = [f"# gate false-violation rate, honest mechanisms; machine: {platform.machine()} "
             f"{platform.processor() or ''} ({__import__('os').cpu_count()} cores, CPU only)",
             "mechanism | neighbourhood (claim -> audit) | eps | delta | gated bounds | reps | flagged | rate | "
             "budget | budget + 3 s.e. | seconds"]
    print(lines[-1])
    for i, sc in enumerate(SCENARIOS):
        t = time.perf_counter()
        sim = simulate_gate(sc, args.reps, np.random.default_rng([args.seed, i]), beta=BETA)
        row = (f"{sc.name} | {sc.claim_neighbourhood} -> {sc.audit_neighbourhood} | {sc.epsilon:g} | {sc.delta:g} | "
               f"{'+'.join(sim.gated)} | {sim.reps} | {sim.false_violations} | {sim.rate:.4f} | {sim.beta:g} | "
               f"{sim.binomial_limit():.4f} | {time.perf_counter() - t:.0f}")
        print(row, flush=True)
        lines.append(row)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
