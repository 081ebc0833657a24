"""The theory check: the empirical attack accuracy against the theoretical MI accuracy upper bounds.

A DP claim bounds the accuracy of *every* membership-inference attacker (Thudi, Yeom, Erlingsson,
Sablayrolles, Izzo's 1/2 + η: :meth:`privaudit.metrics_files.BoundsEntry.accuracy_bounds`); an
attack that beats a bound by more than its error bar is evidence of an implementation or
accounting bug. Used by the release gate (:mod:`privaudit.report.gate`) and the report's bounds table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["theory_violations", "theory_z"]


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
