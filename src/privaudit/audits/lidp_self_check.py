"""The LiDP audit checked against a mechanism whose ε is known (Pillutla et al. 2023, §4).

:func:`gaussian_self_check` draws canary statistics of the Gaussian mechanism calibrated to
(ε, δ) (:mod:`privaudit.mechanisms.gaussian`) and runs them through the same
:func:`privaudit.audits.lidp.lidp_audit` the pipeline uses. A sound audit returns ε̂ ≤ ε except
with probability ``beta``; ``python -m stages.lidp --self-check EPS`` prints the result and fails
when ε̂ exceeds the true ε.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.audits.lidp import LidpSettings
from privaudit.mechanisms import gaussian_mechanism_sigma, simulate_gaussian_scores

__all__ = ["SelfCheckResult", "gaussian_self_check"]


@dataclass(frozen=True)
class SelfCheckResult:
    """ε̂ of the LiDP audit on a mechanism with known ``epsilon`` (at ``delta``)."""

    epsilon: float
    delta: float
    eps_lower_bound: float
    eps_lower_bound_k1: float
    by_order: dict[str, float]
    canaries: int
    order: int
    method: str

    @property
    def passed(self) -> bool:
        """Whether the audit stayed at or below the truth (it may fail with probability ``beta``)."""
        return self.eps_lower_bound <= self.epsilon

    def summary(self) -> str:
        orders = ", ".join(f"{k} {v:.3f}" for k, v in self.by_order.items())
        return (f"lidp self-check: Gaussian mechanism with eps={self.epsilon:g}, delta={self.delta:g}: "
                f"eps_hat={self.eps_lower_bound:.3f} (K={self.canaries}, order {self.order} {self.method}), "
                f"K=1 {self.eps_lower_bound_k1:.3f}; {orders}")

    def raise_if_failed(self) -> None:
        if not self.passed:
            raise ValueError(f"self-check failed: eps_hat {self.eps_lower_bound:.3f} exceeds the true eps "
                             f"{self.epsilon}")


def gaussian_self_check(
    epsilon: float, *, settings: LidpSettings, delta: float, beta: float, trials: int, canaries: int,
    null_canaries: int, dim: int, rng: np.random.Generator,
) -> SelfCheckResult:
    """LiDP §4: the LiDP audit (``settings``) on Gaussian-mechanism scores with known (``epsilon``, ``delta``).

    ``trials``, ``canaries`` (K), ``null_canaries`` (m), ``beta`` and ``settings`` are the ``lidp.*``
    params; ``dim`` is the mechanism's dimension; ``rng`` draws the scores, then splits the trials.
    """
    sigma = gaussian_mechanism_sigma(epsilon, delta)
    sx, sy = simulate_gaussian_scores(sigma, trials, canaries, dim, rng, null_canaries)
    # the mechanism's statistic <theta, c> is larger for members; the audit takes losses (lower = member)
    res, _ = settings.audit(-sx, -sy, delta=delta, beta=beta, rng=rng)
    return SelfCheckResult(epsilon=float(epsilon), delta=float(delta), eps_lower_bound=float(res["eps_lower_bound"]),
                           eps_lower_bound_k1=float(res["eps_lower_bound_k1"]),
                           by_order={k: float(v) for k, v in res["by_order"].items()},
                           canaries=int(canaries), order=settings.order, method=settings.method)
