"""The LiDP audit checked against a mechanism whose ε is known (Pillutla et al. 2023, §4).

:func:`gaussian_self_check` draws canary statistics of the Gaussian mechanism calibrated to
(ε, δ) (:mod:`privaudit.stats.gaussian_mechanism`) and runs them through the same
:func:`privaudit.audits.lidp.lidp_audit` the pipeline uses. A sound audit returns ε̂ ≤ ε except
with probability ``level``; ``python -m stages.lidp --self-check EPS`` prints the result and fails
when ε̂ exceeds the true ε.

A bound of 0 is below every ε, so a self-check whose audit reaches no positive bound has tested
nothing: :meth:`SelfCheckResult.raise_if_failed` refuses it too, naming the trials and the fix.
The pipeline's ``lidp.trials`` (32 on the default audit, where each trial is a pair of trained
models) are far too few for that; the simulated mechanism costs milliseconds per trial, so the
self-check runs :data:`SELF_CHECK_TRIALS` trials unless told otherwise (measured on the default
params, order 1 Wilson, dimension 100 000: 4096 trials give ε̂ = 0.633 at ε = 2, 0.213 at ε = 1,
0.038 at ε = 0.5 and 0 at ε = 0.25; 32 trials give 0 at ε = 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.audits.lidp import LidpSettings
from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma, simulate_gaussian_scores

__all__ = ["SELF_CHECK_TRIALS", "SelfCheckResult", "gaussian_self_check"]

#: default number of simulated trial pairs of the self-check (see the module docstring)
SELF_CHECK_TRIALS = 4096


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
    trials: int | None = None

    @property
    def passed(self) -> bool:
        """Whether the audit stayed at or below the truth (it may fail with probability ``level``)."""
        return self.eps_lower_bound <= self.epsilon

    @property
    def tested(self) -> bool:
        """Whether the audit reached a positive bound: ε̂ = 0 is below any ε and tests nothing."""
        return self.eps_lower_bound > 0.0

    def summary(self) -> str:
        orders = ", ".join(f"{k} {v:.3f}" for k, v in self.by_order.items())
        trials = "" if self.trials is None else f"{self.trials} trials, "
        return (f"lidp self-check: Gaussian mechanism with eps={self.epsilon:g}, delta={self.delta:g}: "
                f"eps_hat={self.eps_lower_bound:.3f} ({trials}K={self.canaries}, order {self.order} {self.method}), "
                f"K=1 {self.eps_lower_bound_k1:.3f}; {orders}")

    def raise_if_failed(self) -> None:
        """``ValueError`` when ε̂ exceeds the true ε, or when ε̂ = 0 (nothing was tested)."""
        if not self.passed:
            raise ValueError(f"self-check failed: eps_hat {self.eps_lower_bound:.3f} exceeds the true eps "
                             f"{self.epsilon}")
        if not self.tested:
            trials = "these" if self.trials is None else f"{self.trials}"
            raise ValueError(
                f"self-check inconclusive: eps_hat = 0 at eps={self.epsilon:g} with {trials} trials "
                f"(K={self.canaries}), and a bound of 0 cannot exceed any eps, so the audit was not tested; "
                f"use more trials (--trials, e.g. {max(4 * (self.trials or 0), SELF_CHECK_TRIALS)}) or a larger eps")


def gaussian_self_check(
    epsilon: float, *, settings: LidpSettings, delta: float, level: float, trials: int, canaries: int,
    null_canaries: int, dim: int, rng: np.random.Generator,
) -> SelfCheckResult:
    """LiDP §4: the LiDP audit (``settings``) on Gaussian-mechanism scores with known (``epsilon``, ``delta``).

    ``trials``, ``canaries`` (K), ``null_canaries`` (m) and ``settings`` are the ``lidp.*`` params;
    ``level`` is the failure probability of the one-sided ε lower bound (``P(ε < ε̂) <= level``);
    ``dim`` is the mechanism's dimension; ``rng`` draws the scores, then splits the trials.
    """
    sigma = gaussian_mechanism_sigma(epsilon, delta)
    sx, sy = simulate_gaussian_scores(sigma, trials, canaries, dim, rng, null_canaries)
    # the mechanism's statistic <theta, c> is larger for members; the audit takes losses (lower = member)
    res, _ = settings.audit(-sx, -sy, delta=delta, level=level, rng=rng)
    return SelfCheckResult(epsilon=float(epsilon), delta=float(delta), eps_lower_bound=float(res["eps_lower_bound"]),
                           eps_lower_bound_k1=float(res["eps_lower_bound_k1"]),
                           by_order={k: float(v) for k, v in res["by_order"].items()},
                           canaries=int(canaries), order=settings.order, method=settings.method, trials=int(trials))
