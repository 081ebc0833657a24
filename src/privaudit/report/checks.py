"""Reading values out of the metrics files for the gate and the report.

Helpers shared by :mod:`privaudit.report.gate` and the report renderer: typed access to
``metrics/ltu.json``, ``metrics/audit.json`` and ``metrics/bounds.json`` entries (a value of
the wrong type raises ``ValueError`` naming the key; absent or null values are ``None``),
the audited ε lower bounds, the theoretical MI accuracy upper bounds and their violations,
and the shape check of ``metrics/gate.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "BOUND_KINDS",
    "accuracy_bounds",
    "as_mapping",
    "audited_epsilons",
    "defender_names",
    "empirical_stderr",
    "fmt_value",
    "privacy_stderr",
    "read_number",
    "theory_violations",
    "theory_z",
    "validate_gate_result",
]


#: Keys of ``metrics/bounds.json`` that are upper bounds on membership-inference accuracy.
BOUND_KINDS: tuple[str, ...] = ("thudi", "yeom", "erlingsson", "sablayrolles")


def fmt_value(value: float) -> str:
    """Format a number for a reason string (4 significant digits)."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def as_mapping(value: Any, where: str) -> Mapping[str, Any] | None:
    """Return ``value`` if it is a mapping, ``None`` if it is ``None``, else raise."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object, got {type(value).__name__}: {value!r}")
    return value


def read_number(entry: Mapping[str, Any] | None, key: str, where: str) -> float | None:
    """Read ``entry[key]`` as a float; ``None`` when the key is absent or null.

    Raises ``ValueError`` naming ``where.key`` when the value is not a number.
    """
    if entry is None or key not in entry or entry[key] is None:
        return None
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}.{key} must be a number or null, got {value!r}")
    return float(value)


def defender_names(*sources: Mapping[str, Any]) -> list[str]:
    """Union of defender names over the metrics files, in first-seen order."""
    names: dict[str, None] = {}
    for source in sources:
        for name in source:
            names.setdefault(str(name), None)
    return list(names)


def privacy_stderr(entry: Mapping[str, Any], where: str) -> float | None:
    """``privacy_stderr``, or Eq. 1's ``2 sqrt(A(1-A)/N)`` from accuracy and rounds."""
    stderr = read_number(entry, "privacy_stderr", where)
    if stderr is not None:
        return stderr
    accuracy = read_number(entry, "accuracy", where)
    rounds = read_number(entry, "rounds", where)
    if accuracy is None or rounds is None or rounds <= 0 or not 0.0 <= accuracy <= 1.0:
        return None
    return 2.0 * math.sqrt(accuracy * (1.0 - accuracy) / rounds)


def audited_epsilons(defender: str, entry: Mapping[str, Any] | None) -> dict[str, float]:
    """The audited ε lower bounds of one ``metrics/audit.json`` entry, by source name.

    Sources: ``game3.eps_low``, ``lidp.eps_lower_bound`` (K = √n canaries) and
    ``lidp.eps_lower_bound_k1`` (K = 1). Absent or null values are left out.
    """
    found: dict[str, float] = {}
    if entry is None:
        return found
    where = f"audit.{defender}"
    game3 = as_mapping(entry.get("game3"), f"{where}.game3")
    lidp = as_mapping(entry.get("lidp"), f"{where}.lidp")
    for source, sub, key in (
        ("game3.eps_low", game3, "eps_low"),
        ("lidp.eps_lower_bound", lidp, "eps_lower_bound"),
        ("lidp.eps_lower_bound_k1", lidp, "eps_lower_bound_k1"),
    ):
        value = read_number(sub, key, f"{where}.{source.split('.')[0]}")
        if value is not None:
            found[source] = value
    return found


def accuracy_bounds(defender: str, entry: Mapping[str, Any] | None) -> dict[str, float]:
    """Theoretical upper bounds on MI accuracy from one ``metrics/bounds.json`` entry.

    Returns ``{kind: bound}`` for the finite values among :data:`BOUND_KINDS`, plus
    ``"izzo"`` = 1/2 + ``mip_eta`` (Izzo et al. 2023, Definition 1 with k = n/2: an η-MIP
    algorithm admits no attacker with accuracy above 1/2 + η).
    """
    bounds: dict[str, float] = {}
    if entry is None:
        return bounds
    where = f"bounds.{defender}"
    for kind in BOUND_KINDS:
        value = read_number(entry, kind, where)
        if value is not None and math.isfinite(value):
            bounds[kind] = value
    eta = read_number(entry, "mip_eta", where)
    if eta is not None and math.isfinite(eta):
        bounds["izzo"] = 0.5 + eta
    return bounds


def theory_z(level: float, attackers: int) -> float:
    """Standard errors an attack accuracy must exceed a bound by before it is called a bug.

    The empirical accuracy is the maximum over ``attackers`` attackers, each roughly normal around
    its true accuracy, which the claim bounds; a one-sided test per attacker at ``level /
    attackers`` (Bonferroni over the attackers looked at) keeps the false "bug" probability at
    most ``level``. Never fewer than 2 standard errors.

    >>> round(theory_z(0.01, 5), 3), theory_z(0.5, 1)
    (2.878, 2.0)
    """
    from scipy.stats import norm

    if not 0.0 < level < 1.0:
        raise ValueError(f"theory check level must be in (0, 1), got {level!r}")
    if attackers < 1:
        raise ValueError(f"attackers must be >= 1, got {attackers}")
    return max(2.0, float(norm.isf(level / attackers)))


def theory_violations(
    bounds: Mapping[str, float], accuracy: float, stderr: float | None = None, z: float = 2.0
) -> dict[str, float]:
    """The bounds that the empirical accuracy exceeds: ``{kind: bound}``.

    With ``stderr`` the exceedance must be beyond ``z`` standard errors
    (``accuracy - z stderr > bound``, see :func:`theory_z`); without it the point estimate is compared.
    """
    margin = z * stderr if stderr is not None and math.isfinite(stderr) and stderr > 0 else 0.0
    return {kind: b for kind, b in bounds.items() if accuracy - margin > b}


def empirical_stderr(
    bounds_entry: Mapping[str, Any], ltu_entry: Mapping[str, Any] | None, defender: str
) -> float | None:
    """Standard error of the empirical accuracy: ``empirical_accuracy_stderr`` if recorded,
    else the binomial ``sqrt(A(1-A)/N)`` with N the LTU rounds of the strongest attacker."""
    stderr = read_number(bounds_entry, "empirical_accuracy_stderr", f"bounds.{defender}")
    if stderr is not None:
        return stderr
    accuracy = read_number(bounds_entry, "empirical_accuracy", f"bounds.{defender}")
    rounds = read_number(ltu_entry, "rounds", f"ltu.{defender}") if ltu_entry else None
    if accuracy is None or rounds is None or rounds <= 0 or not 0.0 <= accuracy <= 1.0:
        return None
    return math.sqrt(accuracy * (1.0 - accuracy) / rounds)


def validate_gate_result(gate: Any, where: str = "gate") -> dict[str, Any]:
    """Check that ``gate`` has the ``metrics/gate.json`` shape; return it as a dict.

    Raises:
        ValueError: naming the first key that is missing or has the wrong type.
    """
    if not isinstance(gate, Mapping):
        raise ValueError(f"{where} must be an object, got {type(gate).__name__}")
    if not isinstance(gate.get("passed"), bool):
        raise ValueError(f"{where}.passed must be true or false, got {gate.get('passed')!r}")
    _check_reasons(gate.get("reasons"), f"{where}.reasons")
    defenders = gate.get("defenders")
    if not isinstance(defenders, Mapping):
        raise ValueError(f"{where}.defenders must be an object, got {defenders!r}")
    for name, entry in defenders.items():
        sub = f"{where}.defenders.{name}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{sub} must be an object, got {entry!r}")
        if not isinstance(entry.get("passed"), bool):
            raise ValueError(f"{sub}.passed must be true or false, got {entry.get('passed')!r}")
        _check_reasons(entry.get("reasons"), f"{sub}.reasons")
    return dict(gate)


def _check_reasons(reasons: Any, where: str) -> None:
    """Raise ``ValueError`` unless ``reasons`` is a list of strings."""
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise ValueError(f"{where} must be a list of strings, got {reasons!r}")
