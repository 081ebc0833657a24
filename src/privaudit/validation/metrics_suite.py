"""GX suite ``metrics`` of the metric files (docs/architecture.md, "Metrics contracts").

The nested metrics object is flattened to one row per leaf, indexed by its dotted path (e.g.
``mlp.game3.eps_low``), and each leaf is checked by the rule its key name implies:

- ε (``eps_*``, ``claimed_epsilon``, ``epsilon``): finite and >= 0. ``eps_high`` may be null
  or +inf (no upper bound could be certified); ``claimed_epsilon`` may be null (no DP claim).
- scores and probabilities (``accuracy``, ``*_accuracy``, ``privacy``, ``utility``, ``thudi``,
  ``yeom``, ``erlingsson``, ``sablayrolles``, ``mip_eta``, ``p_member``, ``alpha``, ``beta``,
  ``delta``): in [0, 1]; in ``bounds`` they may be null (no claimed ε).
- standard errors (``*_stderr``): finite and >= 0.
- counts (``rounds``, ``trials``, ``canaries``, ``certified_*``, ``null_canaries``, ``guesses``,
  ``correct``, ``order``): integers >= 0.
- flags (``passed``, ``violation``, ``exceeds_theory``): booleans.

Required keys per kind (the fixed contracts): ``ltu``: per defender ``accuracy, privacy,
privacy_stderr, utility, utility_stderr, rounds, attacker``; ``audit``: per defender a ``game3``
block (``eps_low, eps_high, canaries``) and/or a ``lidp`` block (``eps_lower_bound,
eps_lower_bound_k1, trials, canaries``); ``bounds``: per defender ``thudi, yeom, erlingsson,
sablayrolles, mip_eta, empirical_accuracy``; ``gate``: ``passed, reasons, defenders`` and per
defender ``passed, reasons``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import pandas as pd

from privaudit.validation._frames import FINITE_MAX
from privaudit.validation.core import check_suite

KINDS = ("ltu", "audit", "bounds", "gate")
UNIT_KEYS = {"accuracy", "privacy", "utility", "thudi", "yeom", "erlingsson", "sablayrolles", "mip_eta",
             "p_member", "alpha", "beta", "delta", "level"}
COUNT_KEYS = {"rounds", "trials", "canaries", "null_canaries", "guesses", "correct", "order"}
FLAG_KEYS = {"passed", "violation", "exceeds_theory"}
NULLABLE_EPS = {"eps_high", "claimed_epsilon"}
REQUIRED: dict[str, tuple[str, ...]] = {
    "ltu": ("accuracy", "privacy", "privacy_stderr", "utility", "utility_stderr", "rounds", "attacker"),
    "bounds": ("thudi", "yeom", "erlingsson", "sablayrolles", "mip_eta", "empirical_accuracy"),
    "game3": ("eps_low", "eps_high", "canaries"),
    "lidp": ("eps_lower_bound", "eps_lower_bound_k1", "trials", "canaries"),
    "gate": ("passed", "reasons", "defenders"),
    "gate_defender": ("passed", "reasons"),
}


def rule_for(leaf: str) -> str | None:
    """The check a metric leaf named ``leaf`` gets: eps, unit, stderr, count, flag or None."""
    if leaf.startswith("eps") or leaf in ("claimed_epsilon", "epsilon"):
        return "eps"
    if leaf.endswith("_stderr"):
        return "stderr"
    if leaf in UNIT_KEYS or leaf.endswith("_accuracy"):
        return "unit"
    if leaf in COUNT_KEYS or leaf.startswith("certified_"):
        return "count"
    if leaf in FLAG_KEYS:
        return "flag"
    return None


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists and scalars are leaves."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _required_paths(kind: str, metrics: Mapping[str, Any]) -> list[str]:
    if kind == "gate":
        paths = list(REQUIRED["gate"])
        defenders = metrics.get("defenders")
        if isinstance(defenders, Mapping):
            paths += [f"defenders.{d}.{k}" for d in defenders for k in REQUIRED["gate_defender"]]
        return paths
    paths = []
    for name, block in metrics.items():
        block = block if isinstance(block, Mapping) else {}
        if kind == "audit":
            parts = [p for p in ("game3", "lidp") if p in block] or ["game3", "lidp"]
            paths += [f"{name}.{p}" for p in parts]
            paths += [f"{name}.{p}.{k}" for p in parts for k in REQUIRED[p] if isinstance(block.get(p), Mapping)]
        else:
            paths += [f"{name}"] + [f"{name}.{k}" for k in REQUIRED[kind]]
    return paths


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def validate_metrics(kind: Literal["ltu", "audit", "bounds", "gate"], metrics: Mapping[str, Any]) -> None:
    """Raise :class:`~privaudit.validation.ValidationFailed` unless ``metrics`` honours its contract.

    Args:
        kind: which metrics file: ``ltu`` (``metrics/ltu.json``), ``audit`` (``metrics/audit.json``,
            or ``{defender: {"game3": ...}}`` for the Game-3 stage alone), ``bounds``, ``gate``.
        metrics: the object about to be written (or just read).
    """
    import great_expectations.expectations as gxe

    if kind not in KINDS:
        raise ValueError(f"metrics kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(metrics, Mapping):
        raise ValueError(f"{kind} metrics must be a JSON object, got {type(metrics).__name__}")
    flat = flatten(metrics)
    nested = {p.rsplit(".", 1)[0] for p in flat if "." in p}
    nested |= {".".join(p.split(".")[:i]) for p in flat for i in range(1, p.count(".") + 1)}
    required = _required_paths(kind, metrics)
    # a defender entry that is not an object is listed first (its missing keys follow)
    not_objects = [] if kind == "gate" else [f"{p} (an object)" for p in metrics if not isinstance(metrics[p], Mapping)]
    req_frame = pd.DataFrame({"present": [False] * len(not_objects) + [(p in flat) or (p in nested) for p in required]},
                             index=pd.Index(not_objects + required, name="key"), dtype=object)
    by_rule: dict[str, dict[str, Any]] = {r: {} for r in ("eps", "unit", "stderr", "count", "flag")}
    for path, value in flat.items():
        rule = rule_for(path.rsplit(".", 1)[-1])
        if rule is None:
            continue
        leaf = path.rsplit(".", 1)[-1]
        if rule == "eps" and leaf in NULLABLE_EPS and (value is None or (leaf == "eps_high" and _number(value) == math.inf)):
            continue
        if rule == "unit" and kind == "bounds" and value is None:
            continue
        by_rule[rule][path] = value
    frames = {"required": req_frame}
    exps: dict[str, list] = {"required": [gxe.ExpectColumnValuesToBeInSet(
        column="present", value_set=[True], description=f"required {kind} keys present (docs/architecture.md contract)")]}
    specs = {
        "eps": ("epsilons", 0.0, FINITE_MAX, "epsilon values finite and >= 0 (eps_high may be null = inf)"),
        "unit": ("scores", 0.0, 1.0, "privacy, utility, accuracies and probabilities in [0, 1]"),
        "stderr": ("stderrs", 0.0, FINITE_MAX, "standard errors finite and >= 0"),
        "count": ("counts", 0.0, FINITE_MAX, "counts are integers >= 0"),
    }
    for rule, (batch, lo, hi, text) in specs.items():
        values = by_rule[rule]
        if not values:
            continue
        nums = [_number(v) for v in values.values()]
        frame = pd.DataFrame({"value": nums}, index=pd.Index(list(values), name="key"))
        e = [gxe.ExpectColumnValuesToNotBeNull(column="value", description=f"{batch} are numbers (not null/NaN)"),
             gxe.ExpectColumnValuesToBeBetween(column="value", min_value=lo, max_value=hi, description=text)]
        if rule == "count":
            frame["integer"] = [math.isfinite(x) and float(x).is_integer() for x in nums]
            e.append(gxe.ExpectColumnValuesToBeInSet(column="integer", value_set=[True],
                                                     description="counts are whole numbers"))
        frames[batch], exps[batch] = frame, e
    if by_rule["flag"]:
        frames["flags"] = pd.DataFrame({"value": [v if isinstance(v, bool) else str(v) for v in by_rule["flag"].values()]},
                                       index=pd.Index(list(by_rule["flag"]), name="key"), dtype=object)
        exps["flags"] = [gxe.ExpectColumnValuesToBeInSet(column="value", value_set=[True, False],
                                                         description="flags are true/false")]
    check_suite("metrics", frames, exps, subject=f"{kind} metrics")
