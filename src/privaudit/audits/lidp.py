"""Lifted-DP ε lower bound from raw trial statistics (Pillutla et al. 2023, Algorithm 1 lines 6-8).

The test of canary c is ``L_canary(c, θ) ≤ τ`` (App. D, eqs. 22/24): the cross-entropy for data
canaries, ``⟨c, θ⟩`` for random-gradient canaries; :mod:`privaudit.stats.thresholds` works with
"larger = more member-like" scores, so the statistics are negated. τ is chosen honestly
(``lidp.tau_selection``); in both modes the trials are shuffled once and split by index into
trials used only to choose τ candidates and trials used only to certify:

* ``split`` (default, App. E "Tuning the threshold"): the τ grid is built and τ is selected on a
  random ``lidp.tune_fraction`` of the trials (:func:`select_threshold`) and ε̂ is certified on
  the others (:func:`certify_selected`, which refuses a certification trial whose *index* was
  used for tuning; trials with equal scores are different trials);
* ``bonferroni``: max over the τ grid of the bound at level/T on the certification trials
  (:func:`certify_bonferroni`).  A union bound over T candidates is valid only for candidates
  fixed before the certification outcomes are seen, and the grid (quantiles of the scores) is
  data-dependent, so it is built on a small **pilot** of ``pilot_fraction`` of the trials (at
  least one) that is not certified.  (The null scores are not independent of the certified
  outcomes — the null side ``y`` of the bound is computed from them — and a data-independent grid
  is impossible without knowing the scale of the losses.)

Reported: ε̂ for the configured order/method, ε̂ for every order in {1, 2, 4} × {Wilson, Bernstein}
plus the exact 1st-order Clopper-Pearson (``by_order``), the K = 1 baseline (only canary c_K of
each θ1 and the first null — the standard DP audit on the same models), and ε̂ on growing prefixes
of the certification trials for the ε̂-vs-trials curve, certified at the same per-threshold level
as the headline (level, or level/T with Bonferroni), so that its last point equals the headline.

Exact 1st order (``exact_first_order``, default on): a Wilson interval of effective order 1 (the
K = 1 view always, and the headline when ``order`` is 1) is replaced by the exact Clopper-Pearson
interval.  Wilson is only asymptotic: at the default 16 certification trials its one-sided miss
where LiDP audits are decided (p1 ≥ 0.3 lower / p0 ≤ 0.2 upper) is 0.049 / 0.032 against 0.025
(0.037 at n = 64, 0.031 at 256, 0.028 at 1024, computed exactly from the binomial).  The cost in
ε̂ is at most 0.04 and about 1% at n = 1024 (table in :mod:`privaudit.stats.xbern`).  The
interval actually used is reported as ``method``; the requested one as ``requested_method``.

The replace-one neighbourhood (App. B.2, eq. 12) uses the same computation on outcomes measured
on one model per trial (:func:`lidp_epsilon_lower_bound_replace_one`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.audits.protocol import AuditBound, AuditInputs, AuditRequest
from privaudit.canaries.stats_files import CANARY_FILES, read_canary_stats
from privaudit.stats import certify_bonferroni, certify_selected, effective_order, select_threshold

ORDERS = (1, 2, 4)
METHODS = ("wilson", "bernstein")
EXACT = "clopper_pearson"


def _grid(member: np.ndarray, null: np.ndarray, n: int) -> np.ndarray:
    """Candidate τ (score scale): half spread over the pooled scores, half in the upper tail of the
    null scores at geometrically shrinking false-positive rates (where DP audits are decided,
    LiDP App. E), down to 1/(#nulls + 1)."""
    pooled = np.quantile(np.concatenate([member.ravel(), null.ravel()]), np.linspace(0.02, 0.98, max(1, n // 2)))
    tail = np.quantile(null.ravel(), 1.0 - np.geomspace(0.5, 1.0 / (null.size + 1), max(1, n - n // 2)))
    return np.unique(np.concatenate([pooled, tail]))


def _certify(sx: np.ndarray, sy: np.ndarray, tune: np.ndarray, cert: np.ndarray, grid: np.ndarray,
             delta: float, level: float, order: int, method: str, strategy: str) -> tuple[float, float]:
    """(ε̂ at ``level``, τ on the score scale) for one interval family; ``tune``/``cert`` are trial indices."""
    if strategy == "bonferroni":  # the grid comes from the pilot trials `tune`, never certified
        c = certify_bonferroni(sx[cert], sy[cert], grid, delta, level=level, order=order,
                               method=method)  # type: ignore[arg-type]
    else:
        sel = select_threshold(sx[tune], sy[tune], grid, delta, level=level, order=order,
                               method=method, trial_indices=tune)  # type: ignore[arg-type]
        c = certify_selected(sel, sx[cert], sy[cert], delta, level=level, order=order,
                             method=method, trial_indices=cert)  # type: ignore[arg-type]
    return float(c.epsilon_lower_bound), float(c.threshold)


def lidp_audit(
    loss_in: np.ndarray, loss_null: np.ndarray, *, delta: float, level: float, order: int, method: str,
    tune_fraction: float, n_thresholds: int, rng: np.random.Generator, tau_selection: str = "split",
    neighbourhood: str = Neighbourhood.ADD_REMOVE, curve_points: int = 8, pilot_fraction: float = 0.125,
    exact_first_order: bool = True,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """ε̂ of Algorithm 1 with an honestly chosen τ, and the ε̂-vs-trials curve.

    Args:
        loss_in: (n, K) L_canary of θ1 on its K canaries.
        loss_null: (n, m) L_canary on m fresh canaries (θ0, or θ1 for ``replace_one``).
        delta: δ of the audited (ε, δ) claim.
        level: failure probability of each one-sided bound reported: ``P(ε < eps_lower_bound) <= level``
            (likewise for ``eps_lower_bound_k1``); reported as ``level`` (and, unchanged, as ``beta``).
        order, method: XBern interval of the headline (``method`` ``"wilson"``, ``"bernstein"`` or
            ``"clopper_pearson"``, the last with order 1 only).
        tune_fraction: share of the trials used only to select τ (``split``).
        n_thresholds: size of the τ grid before de-duplication.
        rng: shuffles the trials before they are split.
        tau_selection: ``"split"`` or ``"bonferroni"`` (module docstring).
        curve_points: number of prefixes of the certification trials in the curve.
        pilot_fraction: share of the trials (at least 1) that only build the τ grid with
            ``bonferroni``; they are not certified.
        exact_first_order: replace Wilson intervals of effective order 1 by Clopper-Pearson.
    Returns:
        (metrics dict, DataFrame with columns ``trials, eps_k1, eps_ksqrt``).  The metrics hold
        ``level`` (and ``beta``, the same value: the failure probability of each ε lower bound) and
        ``level_per_threshold`` (the level each τ candidate was certified at: level, or level/T).
    """
    n, k = loss_in.shape
    if loss_null.shape[0] != n:
        raise ValueError(f"loss_in has {n} trials but loss_null has {loss_null.shape[0]}")
    if tau_selection not in ("split", "bonferroni"):
        raise ValueError(f"lidp.tau_selection must be 'split' or 'bonferroni', got {tau_selection!r}")
    if method not in METHODS + (EXACT,):
        raise ValueError(f"lidp.method must be one of {METHODS + (EXACT,)}, got {method!r}")
    if not 0.0 < pilot_fraction < 1.0:
        raise ValueError(f"pilot_fraction must lie in (0, 1), got {pilot_fraction!r}")
    sx, sy = -np.asarray(loss_in, np.float64), -np.asarray(loss_null, np.float64)
    perm = rng.permutation(n)
    if tau_selection == "split":
        n_tune = int(np.floor(n * tune_fraction))
        if n_tune < 1 or n - n_tune < 1:
            raise ValueError(f"lidp.trials={n} with lidp.tune_fraction={tune_fraction} leaves an empty tuning "
                             "or certification set; use more trials")
    else:
        n_tune = max(1, int(np.floor(n * pilot_fraction)))
        if n - n_tune < 1:
            raise ValueError(f"lidp.trials={n} leaves no trial to certify after the {n_tune} pilot trial(s) "
                             "that build the threshold grid (lidp.tau_selection: bonferroni); use more trials")
    tune, cert = perm[:n_tune], perm[n_tune:]
    grid = _grid(sx[tune], sy[tune], n_thresholds)
    grid1 = _grid(sx[tune, -1], sy[tune, 0], n_thresholds)

    def used(o: int, meth: str, kk: int) -> str:
        return EXACT if exact_first_order and meth == "wilson" and effective_order(o, kk) == 1 else meth

    by_order: dict[str, float] = {}
    taus: dict[str, float] = {}
    for o, meth in [(o, m) for o in ORDERS for m in METHODS] + [(1, EXACT)]:
        e, t = _certify(sx, sy, tune, cert, grid, delta, level, o, meth, tau_selection)
        by_order[f"{meth}_{o}"], taus[f"{meth}_{o}"] = e, t
    method_used = used(order, method, k)
    key = f"{method_used}_{1 if method_used == EXACT else order}"
    eps, tau = by_order[key], taus[key]
    method_k1 = used(1, method, 1)
    x1, y1 = sx[:, -1:], sy[:, :1]
    eps_k1, tau_k1 = _certify(x1, y1, tune, cert, grid1, delta, level, 1, method_k1, tau_selection)
    # ε̂ on growing prefixes of the certification trials, at the thresholds chosen above and at the
    # level each candidate was certified at, so that the last point is the headline
    bonf = tau_selection == "bonferroni"
    level_k = level / grid.size if bonf else level
    level_1 = level / grid1.size if bonf else level
    sizes = sorted({max(1, int(round(len(cert) * f))) for f in np.linspace(1 / curve_points, 1, curve_points)})
    rows = []
    for s in sizes:
        sub = cert[:s]
        ek = certify_bonferroni(sx[sub], sy[sub], [tau], delta, level=level_k, order=order,
                                method=method_used).epsilon_lower_bound  # type: ignore[arg-type]
        e1 = certify_bonferroni(x1[sub], y1[sub], [tau_k1], delta, level=level_1, order=1,
                                method=method_k1).epsilon_lower_bound  # type: ignore[arg-type]
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
        "method": method_used,
        "requested_method": method,
        "method_k1": method_k1,
        "beta": level,
        "level": level,
        "level_per_threshold": level_k,
        "level_per_threshold_k1": level_1,
        "delta": delta,
        "neighbourhood": neighbourhood,
        "tau_selection": tau_selection,
    }
    return metrics, curve


@dataclass(frozen=True)
class LidpSettings:
    """The ``lidp.*`` params that shape one audit (the stage reads them; the library takes them)."""

    order: int
    method: str
    tune_fraction: float
    pilot_fraction: float
    tau_quantiles: int
    tau_selection: str
    neighbourhood: str
    canary_type: str

    def audit(self, loss_in: np.ndarray, loss_null: np.ndarray, *, delta: float, level: float,
              rng: np.random.Generator) -> tuple[dict[str, Any], pd.DataFrame]:
        """:func:`lidp_audit` with these settings at ``level`` (the failure probability of each one-sided
        ε lower bound); the result also names ``canary_type`` and ``level``."""
        res, curve = lidp_audit(loss_in, loss_null, delta=delta, level=level, order=self.order, method=self.method,
                                tune_fraction=self.tune_fraction, n_thresholds=self.tau_quantiles, rng=rng,
                                tau_selection=self.tau_selection, neighbourhood=self.neighbourhood,
                                pilot_fraction=self.pilot_fraction)
        res.update(canary_type=self.canary_type, level=level)
        return res, curve


#: the paper and equation of the bound
CITATION = ("Pillutla et al. 2023, 'Unleashing the Power of Randomization in Auditing Differentially Private ML', "
            "Algorithm 1 (lines 6-8) and eq. 4 (add/remove; App. B.2, eq. 12 for replace-one), XBern intervals of App. C, "
            "honest threshold of App. E")

#: what the LiDP auditor sees
THREAT_MODEL = "black-box: final models' losses (or inner products) on the canaries"


def load_lidp_stats(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(members' statistics (n, K), null statistics (n, m)) of ``<canaries>/<name>/lidp.npz``, validated.

    Loss statistics (``loss_in``/``loss_null``) or, for gradient canaries, signed inner products
    (``stat_in``/``stat_null``); both are "lower = member" after the canaries stage.
    """
    arrays = read_canary_stats(path, "lidp")  # the one reader, validating (GX suite 'canaries')
    if "loss_in" in arrays:
        return arrays["loss_in"], arrays["loss_null"]
    return arrays["stat_in"], arrays["stat_null"]


#: this audit's settings type (:func:`privaudit.audits.protocol.settings_from`)
SETTINGS = LidpSettings


def run(request: AuditRequest, inputs: AuditInputs, settings: LidpSettings) -> AuditBound:
    """The LiDP audit of one audited defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    Reads ``<canaries>/<name>/lidp.npz``; ``settings``: the ``lidp.*`` params it reads
    (:class:`LidpSettings`); the bound certifies ``lidp.neighbourhood`` at the claim's δ for it (or
    ``lidp.delta``) and ``request.level``; the defender draws from ``rng_for(base.seed, "lidp", name)``.
    ``table`` is the ε̂-vs-trials curve (columns ``trials, eps_k1, eps_ksqrt``).
    """
    lidp = settings
    loss_in, loss_null = load_lidp_stats(inputs.need_canaries_dir("lidp") / request.name / CANARY_FILES["lidp"])
    delta = request.delta(lidp.neighbourhood)
    res, curve = lidp.audit(loss_in, loss_null, delta=delta, level=request.level, rng=request.rng("lidp"))
    # the stage log's line (every audit gives one; without it the stage printed an empty line)
    line = (f"lidp: {request.name}: eps_hat={res['eps_lower_bound']:.3f} (K=1: {res['eps_lower_bound_k1']:.3f}) "
            f"at delta={delta:.3g} ({lidp.neighbourhood}), {res['certified_trials']} of {res['trials']} trials "
            f"certifying, level {request.level:.3g}")
    return AuditBound(epsilon=res["eps_lower_bound"], level=request.level, delta=delta,
                      neighbourhood=lidp.neighbourhood, threat_model=THREAT_MODEL, diagnostics=res,
                      lines=(line,), table=curve)
