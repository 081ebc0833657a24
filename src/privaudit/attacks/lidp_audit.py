"""Lifted-DP ε lower bound from raw trial losses (Pillutla et al. 2023, Algorithm 1 lines 6-8).

The test statistic of a canary is 𝕀(loss < τ) (Algorithm 1 line 6). τ is tuned on a held-out
share of the trials (``lidp.tune_fraction``, App. E) over quantiles of the tuning losses, and the
reported ε̂ is computed on the remaining trials only, so the failure probability β holds.
The K=1 figure uses the last canary c_K of each certification trial only (one test per model,
the standard recipe on the same trained pairs) for comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.stats import lidp_epsilon_lower_bound


def lidp_audit(
    loss_in: np.ndarray,
    loss_null: np.ndarray,
    *,
    delta: float,
    beta: float,
    order: int,
    method: str,
    tune_fraction: float,
    n_thresholds: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """ε̂ of Algorithm 1 with an honestly chosen τ.

    Args:
        loss_in: (n, K) losses of θ1 on its K canaries.
        loss_null: (n, m) losses of θ0 on m fresh canaries.
    Returns:
        ``{eps_lower_bound, eps_lower_bound_k1, trials, certified_trials, canaries, null_canaries,
        tau, order, method, beta, delta}``.
    """
    n, k = loss_in.shape
    if loss_null.shape[0] != n:
        raise ValueError(f"loss_in has {n} trials but loss_null has {loss_null.shape[0]}")
    n_tune = int(np.floor(n * tune_fraction))
    if n_tune < 1 or n - n_tune < 1:
        raise ValueError(f"lidp.trials={n} with lidp.tune_fraction={tune_fraction} leaves an empty tuning "
                         "or certification set; use more trials")
    perm = rng.permutation(n)
    tune, cert = perm[:n_tune], perm[n_tune:]
    pooled = np.concatenate([loss_in[tune].ravel(), loss_null[tune].ravel()])
    taus = np.unique(np.quantile(pooled, np.linspace(0.02, 0.98, n_thresholds)))
    scores = [
        lidp_epsilon_lower_bound((loss_in[tune] < t).astype(float), (loss_null[tune] < t).astype(float),
                                 delta=delta, beta=beta, order=order, method=method)
        for t in taus
    ]
    # prefer the largest bound; among ties (e.g. all zero) the median threshold
    best = max(range(len(taus)), key=lambda i: (scores[i], -abs(i - len(taus) // 2)))
    tau = float(taus[best])
    x, y = (loss_in[cert] < tau).astype(float), (loss_null[cert] < tau).astype(float)
    eps = lidp_epsilon_lower_bound(x, y, delta=delta, beta=beta, order=order, method=method)
    eps_k1 = lidp_epsilon_lower_bound(x[:, -1:], y[:, :1], delta=delta, beta=beta, order=1, method=method)
    return {
        "eps_lower_bound": eps,
        "eps_lower_bound_k1": eps_k1,
        "trials": n,
        "certified_trials": len(cert),
        "canaries": k,
        "null_canaries": loss_null.shape[1],
        "tau": tau,
        "order": order,
        "method": method,
        "beta": beta,
        "delta": delta,
        "tau_selection": f"tau tuned on {n_tune} of {n} trials, bound certified on the other {len(cert)}",
    }
