"""Lifted-DP ε lower bound from raw trial statistics (Pillutla et al. 2023, Algorithm 1 lines 6-8).

The test of canary c is ``L_canary(c, θ) ≤ τ`` (App. D, eqs. 22/24): the cross-entropy for data
canaries, ``⟨c, θ⟩`` for random-gradient canaries; :mod:`privaudit.stats.thresholds` works with
"larger = more member-like" scores, so the statistics are negated. τ is chosen honestly
(``lidp.tau_selection``):

* ``split`` (default, App. E "Tuning the threshold"): τ is selected on a random
  ``lidp.tune_fraction`` of the trials (:func:`select_threshold`) and ε̂ is certified on the
  others (:func:`certify_selected`, which refuses reused trials);
* ``bonferroni``: max over the τ grid of the bound at β/T on all trials (:func:`certify_bonferroni`).

Reported: ε̂ for the configured order/method, ε̂ for every order in {1, 2, 4} × {Wilson, Bernstein}
(``by_order``), the K = 1 baseline (only canary c_K of each θ1 and the first null — the standard
DP audit on the same models), and ε̂ on growing prefixes of the certification trials for the
ε̂-vs-trials curve. The replace-one neighbourhood (App. B.2, eq. 12) uses the same computation
on outcomes measured on one model per trial (:func:`lidp_epsilon_lower_bound_replace_one`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from privaudit.stats import certify_bonferroni, certify_selected, select_threshold

ORDERS = (1, 2, 4)
METHODS = ("wilson", "bernstein")


def _grid(member: np.ndarray, null: np.ndarray, n: int) -> np.ndarray:
    """Candidate τ (score scale): half spread over the pooled scores, half in the upper tail of the
    null scores at geometrically shrinking false-positive rates (where DP audits are decided,
    LiDP App. E), down to 1/(#nulls + 1)."""
    pooled = np.quantile(np.concatenate([member.ravel(), null.ravel()]), np.linspace(0.02, 0.98, max(1, n // 2)))
    tail = np.quantile(null.ravel(), 1.0 - np.geomspace(0.5, 1.0 / (null.size + 1), max(1, n - n // 2)))
    return np.unique(np.concatenate([pooled, tail]))


def _certify(sx: np.ndarray, sy: np.ndarray, tune: np.ndarray, cert: np.ndarray, grid: np.ndarray,
             delta: float, beta: float, order: int, method: str, strategy: str) -> tuple[float, float]:
    """(ε̂, τ on the score scale) for one interval family."""
    if strategy == "bonferroni":
        c = certify_bonferroni(sx, sy, grid, delta, beta, order, method)  # type: ignore[arg-type]
    else:
        sel = select_threshold(sx[tune], sy[tune], grid, delta, beta, order, method)  # type: ignore[arg-type]
        c = certify_selected(sel, sx[cert], sy[cert], delta, beta, order, method)  # type: ignore[arg-type]
    return float(c.epsilon_lower_bound), float(c.threshold)


def lidp_audit(
    loss_in: np.ndarray, loss_null: np.ndarray, *, delta: float, beta: float, order: int, method: str,
    tune_fraction: float, n_thresholds: int, rng: np.random.Generator, tau_selection: str = "split",
    neighbourhood: str = "add_remove", curve_points: int = 8,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """ε̂ of Algorithm 1 with an honestly chosen τ, and the ε̂-vs-trials curve.

    Args:
        loss_in: (n, K) L_canary of θ1 on its K canaries.
        loss_null: (n, m) L_canary on m fresh canaries (θ0, or θ1 for ``replace_one``).
    Returns:
        (metrics dict, DataFrame with columns ``trials, eps_k1, eps_ksqrt``).
    """
    n, k = loss_in.shape
    if loss_null.shape[0] != n:
        raise ValueError(f"loss_in has {n} trials but loss_null has {loss_null.shape[0]}")
    if tau_selection not in ("split", "bonferroni"):
        raise ValueError(f"lidp.tau_selection must be 'split' or 'bonferroni', got {tau_selection!r}")
    sx, sy = -np.asarray(loss_in, np.float64), -np.asarray(loss_null, np.float64)
    perm = rng.permutation(n)
    if tau_selection == "split":
        n_tune = int(np.floor(n * tune_fraction))
        if n_tune < 1 or n - n_tune < 1:
            raise ValueError(f"lidp.trials={n} with lidp.tune_fraction={tune_fraction} leaves an empty tuning "
                             "or certification set; use more trials")
        tune, cert = perm[:n_tune], perm[n_tune:]
    else:
        tune, cert = perm[:0], perm
    gx, gy = (sx[tune], sy[tune]) if len(tune) else (sx, sy)
    grid = _grid(gx, gy, n_thresholds)
    grid1 = _grid(gx[:, -1], gy[:, 0], n_thresholds)
    by_order: dict[str, float] = {}
    taus: dict[str, float] = {}
    for o in ORDERS:
        for meth in METHODS:
            e, t = _certify(sx, sy, tune, cert, grid, delta, beta, o, meth, tau_selection)
            by_order[f"{meth}_{o}"], taus[f"{meth}_{o}"] = e, t
    eps, tau = by_order[f"{method}_{order}"], taus[f"{method}_{order}"]
    x1, y1 = sx[:, -1:], sy[:, :1]
    eps_k1, tau_k1 = _certify(x1, y1, tune, cert, grid1, delta, beta, 1, method, tau_selection)
    # ε̂ on growing prefixes of the certification trials, at the thresholds chosen above
    sizes = sorted({max(1, int(round(len(cert) * f))) for f in np.linspace(1 / curve_points, 1, curve_points)})
    rows = []
    for s in sizes:
        sub = cert[:s]
        ek = certify_bonferroni(sx[sub], sy[sub], [tau], delta, beta, order, method).epsilon_lower_bound  # type: ignore[arg-type]
        e1 = certify_bonferroni(x1[sub], y1[sub], [tau_k1], delta, beta, 1, method).epsilon_lower_bound  # type: ignore[arg-type]
        rows.append({"trials": int(s), "eps_k1": float(e1), "eps_ksqrt": float(ek)})
    curve = pd.DataFrame(rows, columns=["trials", "eps_k1", "eps_ksqrt"])
    metrics = {
        "eps_lower_bound": eps,
        "eps_lower_bound_k1": eps_k1,
        "by_order": by_order,
        "trials": n,
        "certified_trials": int(len(cert)),
        "tuning_trials": int(len(tune)),
        "canaries": k,
        "null_canaries": int(loss_null.shape[1]),
        "tau": -tau,
        "tau_k1": -tau_k1,
        "order": order,
        "method": method,
        "beta": beta,
        "delta": delta,
        "neighbourhood": neighbourhood,
        "tau_selection": tau_selection,
    }
    return metrics, curve
