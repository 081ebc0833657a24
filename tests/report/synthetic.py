"""Realistic synthetic audit metrics for the report tests.

Two defenders on a 10-class task (digits-like, 900 reserved samples, 200 LTU rounds):

- ``logreg``: a non-DP logistic regression that overfits. The LTU attackers win almost every
  round (privacy 0.04-0.14), its Game-3 / LiDP ε̂ is large, and it claims no ε.
- ``dp_sgd``: DP-SGD with claimed ε = 1 (δ = 1e-5). Attack accuracy ≈ 0.52-0.55,
  ε̂ lower bounds well below 1, theoretical bounds from Thudi et al. 2022 Table 1 at ε = 1.

The numbers follow Eq. 1 and Eq. 2 of Pedersen et al. 2022 exactly, so the gate tests can
reason about them.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pandas as pd

from privaudit.verdict.metrics_files import AuditMetrics, GateResult
from privaudit.config import GateParams
from privaudit.report import ReportInputs
from privaudit.verdict.gate import evaluate_gate

ROUNDS = 200
N_CLASSES = 10
N_RESERVED = 900


def ltu_entry(accuracy: float, rounds: int = ROUNDS, attacker: str | None = None) -> dict[str, Any]:
    """An LTU result for one attacker: accuracy, Eq. 1 privacy ± stderr, rounds."""
    entry: dict[str, Any] = {
        "accuracy": accuracy,
        "privacy": min(2 * (1 - accuracy), 1.0),
        "privacy_stderr": 2 * math.sqrt(accuracy * (1 - accuracy) / rounds),
        "rounds": rounds,
    }
    if attacker is not None:
        entry["attacker"] = attacker
    return entry


def utility(model_accuracy: float) -> tuple[float, float]:
    """Eq. 2: utility and its stderr for a model accuracy on the reserved set."""
    c = N_CLASSES
    score = max((c * model_accuracy - 1) / (c - 1), 0.0)
    stderr = c * math.sqrt(model_accuracy * (1 - model_accuracy) / N_RESERVED)
    return score, stderr


def defender_ltu(gap_acc: float, diff_acc: float, model_acc: float) -> dict[str, Any]:
    """A ``metrics/ltu.json`` entry: top level = strongest attacker (``model_diff``)."""
    u, u_se = utility(model_acc)
    top = ltu_entry(diff_acc, attacker="model_diff")
    top.update(utility=u, utility_stderr=u_se)
    top["attackers"] = {
        "gap": {**ltu_entry(gap_acc), "utility": u, "utility_stderr": u_se},
        "model_diff": {**ltu_entry(diff_acc), "utility": u, "utility_stderr": u_se},
    }
    return top


def metrics() -> dict[str, dict[str, Any]]:
    """Fresh ``ltu``, ``audit`` and ``bounds`` metrics (deep copies, safe to mutate)."""
    ltu = {
        "logreg": defender_ltu(gap_acc=0.93, diff_acc=0.98, model_acc=0.95),
        "dp_sgd": defender_ltu(gap_acc=0.52, diff_acc=0.55, model_acc=0.86),
    }
    audit = {
        "logreg": {
            "claimed_epsilon": None,
            "game3": {"eps_low": 2.1, "eps_high": 4.3, "canaries": 100},
            "lidp": {
                "eps_lower_bound": 3.4,
                "eps_lower_bound_k1": 1.2,
                "trials": 1000,
                "canaries": 32,
                "order": 2,
                "method": "wilson",
                "beta": 0.05,
            },
        },
        "dp_sgd": {
            "claimed_epsilon": 1.0,
            "game3": {"eps_low": 0.0, "eps_high": 1.6, "canaries": 100},
            "lidp": {
                "eps_lower_bound": 0.42,
                "eps_lower_bound_k1": 0.05,
                "trials": 1000,
                "canaries": 32,
                "order": 2,
                "method": "wilson",
                "beta": 0.05,
            },
        },
    }
    eta = 1 / (1 + math.exp(-1.0)) - 0.5
    bounds = {
        "logreg": {
            "thudi": None,
            "yeom": None,
            "erlingsson": None,
            "sablayrolles": None,
            "mip_eta": None,
            "empirical_accuracy": 0.98,
        },
        "dp_sgd": {
            "thudi": 0.731,
            "yeom": 1.0,
            "erlingsson": 0.816,
            "sablayrolles": 0.75,
            "mip_eta": eta,
            "empirical_accuracy": 0.55,
        },
    }
    return copy.deepcopy({"ltu": ltu, "audit": audit, "bounds": bounds})


#: DP-SGD's declared mechanism (σ = 4.65, q = 0.0712, T = 280: ε ≈ 0.99 at δ = 1e-5)
SG_MECHANISM: dict[str, Any] = {"kind": "subsampled_gaussian", "noise_multiplier": 4.65, "sample_rate": 0.0712,
                                "steps": 280}

#: the audit's ``gdp_warning`` for a bare claim whose GDP view exceeds it
GDP_WARNING = ("the GDP view of the black-box runs is 4.55 > the claimed epsilon 1: if this trainer adds Gaussian "
               "noise (a Gaussian trade-off curve, as DP-SGD has), its claim is refuted. For other mechanisms "
               "(Laplace, randomized response) this number says nothing: declare the mechanism in params.yaml "
               "(defenders[i].mechanism, README 'Declaring a mechanism') and the gate tests its own curve")


def blackbox(*, curve: str, description: str, claim_point: tuple[float, float], refutes: bool | None,
             eps: float, gdp: tuple[int, int, float, float], gdp_epsilon: float, warning: str | None = None,
             ceiling_mu: float | None = None, rate_eps: float = 0.0) -> dict[str, Any]:
    """A ``blackbox`` block of ``metrics/audit.json`` (1000 + 1000 runs, 200 + 200 of them for tuning):
    ``gdp`` = the GDP view's (false positives, false negatives, FPR upper, FNR upper)."""
    fp, fn, fpr_u, fnr_u = gdp
    return {
        "eps_lower_bound": eps, "curve": curve, "curve_description": description,
        "refutes_claimed_curve": refutes, "claim_tau": 0.41, "claim_fpr_upper": claim_point[0],
        "claim_fnr_upper": claim_point[1], "gdp_epsilon": gdp_epsilon, "gdp_warning": warning,
        "eps_lower_bound_rate": rate_eps, "mu_lower_bound": 0.06, "mu_point": 0.2, "delta": 1e-5, "level": 0.01,
        "neighbourhood": "add_remove", "threat_model": "black-box: final models only",
        "assumption": "eps_lower_bound: none beyond the claim", "runs_in": 1000, "runs_out": 1000,
        "tuning_in": 200, "tuning_out": 200, "tau": 0.4, "false_positives": fp, "false_negatives": fn,
        "fpr_upper": fpr_u, "fnr_upper": fnr_u, "rate_tau": 0.4, "rate_fpr_upper": fpr_u, "rate_fnr_upper": fnr_u,
        "canary": "crafted input canary",
        "ceiling": None if ceiling_mu is None else {"eps": 0.976, "eps_gdp": 0.953, "mu": ceiling_mu,
                                                    "method": "Steinke et al. 2024 §3 linear heuristic"},
    }


def dp_sgd_blackbox() -> dict[str, Any]:
    """The DP-SGD defender's block: tested against its subsampled-Gaussian curve, holds; with the ceiling."""
    return blackbox(curve="subsampled_gaussian", description="subsampled Gaussian (PLD), sigma=4.65, q=0.0712, T=280",
                    claim_point=(0.28, 0.70), refutes=False, eps=0.1889, gdp=(190, 540, 0.27, 0.71),
                    gdp_epsilon=0.1932, ceiling_mu=0.2566)


def bare_blackbox(warning: str | None = GDP_WARNING) -> dict[str, Any]:
    """A bare (ε = 1, δ = 1e-5) claim's block: the polygon holds, the GDP view (4.55) exceeds the claim."""
    return blackbox(curve="eps_delta", description="(eps, delta) polygon at eps=1, delta=1e-05",
                    claim_point=(0.31, 0.29), refutes=False, eps=0.8668, gdp=(210, 216, 0.30, 0.305),
                    gdp_epsilon=4.5526, warning=warning, rate_eps=0.0)


def with_blackbox(m: dict[str, dict[str, Any]], *, bare: bool = True) -> dict[str, dict[str, Any]]:
    """``m`` with black-box blocks: ``dp_sgd`` declares its subsampled-Gaussian mechanism; with ``bare``, a
    third defender ``dp_bare`` claims (1, 1e-5) with no mechanism and carries the GDP-view warning. It has
    the LTU numbers and bounds of ``dp_sgd``, so it passes the gate."""
    m["audit"]["dp_sgd"]["claimed_delta"] = 1e-5
    m["audit"]["dp_sgd"]["claimed_mechanism"] = dict(SG_MECHANISM)
    m["audit"]["dp_sgd"]["blackbox"] = dp_sgd_blackbox()
    if bare:
        m["ltu"]["dp_bare"] = copy.deepcopy(m["ltu"]["dp_sgd"])
        m["bounds"]["dp_bare"] = copy.deepcopy(m["bounds"]["dp_sgd"])
        m["audit"]["dp_bare"] = {**copy.deepcopy(m["audit"]["dp_sgd"]), "claimed_mechanism": None,
                                 "blackbox": bare_blackbox()}
    return m


def typed(m: dict[str, dict[str, Any]]) -> AuditMetrics:
    """The typed metrics of :func:`metrics` (or of a mutated copy)."""
    return AuditMetrics.parse(m["ltu"], m["audit"], m["bounds"])


def gate_of(m: dict[str, dict[str, Any]], **params: Any) -> GateResult:
    """The release gate over (possibly mutated) synthetic metrics, at the given ``gate.*`` params."""
    return evaluate_gate(typed(m), GateParams(**params))


def _roc(member: np.ndarray, nonmember: np.ndarray) -> dict[str, Any]:
    """ROC curve (higher score = member) with AUC and TPR at 0.1 % / 1 % FPR."""
    scores = np.concatenate([member, nonmember])
    labels = np.concatenate([np.ones(member.size), np.zeros(nonmember.size)])
    order = np.argsort(-scores, kind="mergesort")
    labels = labels[order]
    tpr = np.concatenate([[0.0], np.cumsum(labels) / member.size])
    fpr = np.concatenate([[0.0], np.cumsum(1 - labels) / nonmember.size])
    auc = float(np.trapezoid(tpr, fpr)) if hasattr(np, "trapezoid") else float(np.trapz(tpr, fpr))
    return {
        "fpr": fpr.tolist(),
        "tpr": tpr.tolist(),
        "auc": auc,
        "tpr_at_0_1pct": float(np.interp(1e-3, fpr, tpr)),
        "tpr_at_1pct": float(np.interp(1e-2, fpr, tpr)),
    }


def report_inputs(seed: int = 7, **overrides: Any) -> ReportInputs:
    """Complete :class:`ReportInputs` with all optional parts (``dp_sgd`` with its declared mechanism and a
    black-box block), gate at default params."""
    rng = np.random.default_rng(seed)
    m = typed(with_blackbox(metrics(), bare=False))
    gate = evaluate_gate(m, GateParams())
    n = 400
    ids = [f"s{i:04d}" for i in range(n)]
    roles = ["defender"] * (n // 2) + ["reserved"] * (n // 2)
    privacy_scores = {
        "logreg": pd.DataFrame({"id": ids, "role": roles, "score": rng.beta(1.2, 6.0, n)}),
        "dp_sgd": pd.DataFrame({"id": ids, "role": roles, "score": rng.beta(8.0, 1.5, n)}),
    }
    roc = {
        "logreg": {
            "gap": _roc(rng.normal(1.5, 1, 2000), rng.normal(0, 1, 2000)),
            "model_diff": _roc(rng.normal(2.5, 1, 2000), rng.normal(0, 1, 2000)),
        },
        "dp_sgd": {
            "gap": _roc(rng.normal(0.05, 1, 2000), rng.normal(0, 1, 2000)),
            "model_diff": _roc(rng.normal(0.15, 1, 2000), rng.normal(0, 1, 2000)),
        },
    }
    trials = np.array([100, 200, 500, 1000, 2000])
    epsilon_vs_trials = {
        "logreg": pd.DataFrame(
            {
                "trials": trials,
                "eps_k1": 1.2 * np.log10(trials) / 3,
                "eps_ksqrt": 3.4 * np.log10(trials) / 3,
            }
        ),
        "dp_sgd": pd.DataFrame(
            {
                "trials": trials,
                "eps_k1": np.maximum(0, 0.05 * np.log10(trials / 100) / 1),
                "eps_ksqrt": 0.42 * np.log10(trials) / 3,
            }
        ),
    }
    table1 = pd.DataFrame(
        {
            "model": ["LogisticRegression", "LogisticRegression", "MLPClassifier", "MLPClassifier"],
            "randomness": [
                "fixed seed, fixed order",
                "random seed",
                "fixed seed, fixed order",
                "random seed",
            ],
            "utility": [0.944, 0.944, 0.951, 0.948],
            "privacy": [0.0, 0.0, 0.02, 0.31],
        }
    )
    manifest = {
        "git_rev": "3f2c1e9",
        "created_utc": "2026-11-21T14:00:00Z",
        "params": {
            "base": {"seed": 0, "device": "cpu"},
            "dataset": {"name": "digits"},
            "ltu": {"rounds": ROUNDS},
        },
        "data": {"data/split/membership.parquet": "md5:0c3d5f1b2a"},
        "versions": {"python": "3.11", "privaudit": "0.1.0"},
    }
    values: dict[str, Any] = dict(
        metrics=m,
        gate=gate,
        manifest=manifest,
        privacy_scores=privacy_scores,
        roc=roc,
        epsilon_vs_trials=epsilon_vs_trials,
        table1=table1,
    )
    values.update(overrides)
    return ReportInputs(**values)
