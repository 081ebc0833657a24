"""Honest choice of the rejection threshold tau for LiDP-style audits.

Choosing tau to maximise the epsilon lower bound and then certifying on the same trials
overclaims: the maximum over a grid of bounds, each valid at level ``level`` for a FIXED tau, is
not valid at that level.  This module only hands out certified bounds in two honest ways:

* **split** (LiDP App. E, "Tuning the threshold"): tune tau on one set of trials, certify on a
  disjoint fresh set.  :func:`select_threshold` returns a :class:`ThresholdSelection` (a tau and
  the identity of every tuning trial, *no bound*); :func:`certify_selected` refuses trials that
  were used for tuning.  :func:`certify_split` does the random split itself.

  Trials are identified by **index** when the caller passes ``trial_indices`` (any integer id of
  a trial, e.g. its row in the full score matrix) to both functions: certification is refused
  only for indices that were used for tuning.  Without indices the check falls back to the
  contents of the rows (a hash of each trial's scores), which cannot tell apart two different
  trials with equal scores (e.g. capped losses) and then refuses a genuinely fresh trial.
* **Bonferroni**: the maximum over a grid of T thresholds of the bound computed at ``level / T``
  (:func:`certify_bonferroni`; :func:`bonferroni_max` for any bound function, e.g. Game 3's
  abstention threshold).  The grid must not depend on the certified trials.

Scores are "larger = more member-like": the outcome of canary k in trial i is
``1[score[i, k] >= tau]`` (LiDP App. E eq. 25).  Negate losses before passing them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._checks import check_int, check_prob
from .xbern import Method, xbern_interval_from_counts

__all__ = [
    "ThresholdSelection",
    "ThresholdCertificate",
    "select_threshold",
    "certify_selected",
    "certify_split",
    "certify_bonferroni",
    "bonferroni_max",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ThresholdSelection:
    """A threshold chosen on tuning trials; carries no bound.  Certify it with :func:`certify_selected`."""

    threshold: float
    n_candidates: int
    tuning_trials: int
    tuning_row_hashes: frozenset[str]
    tuning_indices: frozenset[int] | None = None


@dataclass(frozen=True)
class ThresholdCertificate:
    """A certified epsilon lower bound together with how tau was chosen.

    ``strategy`` is ``"split"`` (tau tuned on ``n_tune`` other trials) or ``"bonferroni"``
    (max over ``n_candidates`` thresholds, each at ``level / n_candidates``).  ``level`` is the
    failure probability of the certified one-sided bound ``epsilon_lower_bound``.
    """

    epsilon_lower_bound: float
    threshold: float
    strategy: str
    level: float
    n_candidates: int
    n_tune: int
    n_certify: int


def _scores(name: str, s: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(s, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-D (n, K) array of scores, got shape {arr.shape}")
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} contains NaN")
    return arr


def _grid(thresholds: ArrayLike) -> NDArray[np.float64]:
    t = np.asarray(thresholds, dtype=np.float64).ravel()
    if t.size == 0 or np.any(~np.isfinite(t)):
        raise ValueError(f"thresholds must be a non-empty array of finite numbers, got {thresholds!r}")
    return t


def _counts(scores: NDArray[np.float64], thresholds: NDArray[np.float64]) -> NDArray[np.int64]:
    """(T, n) number of canaries with score >= tau_t in each trial."""
    srt = np.sort(scores, axis=1)
    k = scores.shape[1]
    out = np.empty((thresholds.size, scores.shape[0]), dtype=np.int64)
    for t, tau in enumerate(thresholds):
        out[t] = k - np.count_nonzero(srt < tau, axis=1)
    return out


def _epsilon_curve(
    sx: NDArray[np.float64], sy: NDArray[np.float64], thresholds: NDArray[np.float64],
    delta: float, level: float, order: int, method: Method,
) -> NDArray[np.float64]:
    """eps_hat(tau) per threshold at ``level`` (``level/2`` per XBern side), each valid only for a tau
    fixed in advance (NOT a certificate)."""
    lo, _ = xbern_interval_from_counts(_counts(sx, thresholds), sx.shape[1], level=level / 2.0, order=order,
                                       method=method)
    _, up = xbern_interval_from_counts(_counts(sy, thresholds), sy.shape[1], level=level / 2.0, order=order,
                                       method=method)
    lo = np.atleast_1d(lo)
    up = np.atleast_1d(up)
    num = lo - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(num > 0, np.log(num / np.maximum(up, 1e-300)), 0.0)
    return np.maximum(eps, 0.0)


def _indices(trial_indices: ArrayLike, n: int) -> frozenset[int]:
    """Validated trial indices: n distinct integers, one per row."""
    idx = np.asarray(trial_indices)
    if idx.ndim != 1 or idx.shape[0] != n:
        raise ValueError(f"trial_indices must be a 1-D array with one index per trial ({n}), got shape {idx.shape}")
    if idx.size and (not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"trial_indices must be integers, got dtype {idx.dtype}")
    out = frozenset(int(i) for i in idx)
    if len(out) != n:
        raise ValueError("trial_indices must be distinct (one per trial)")
    return out


def _reuse_error(n_reused: int, detail: str) -> ValueError:
    return ValueError(
        f"scores_x/scores_y reuse {n_reused} trial(s) used to select the threshold ({detail}); the bound "
        "must be certified on trials not used for tuning (lidp.tune_fraction is the share of the "
        "trials set aside for tuning), or use lidp.tau_selection: bonferroni"
    )


def _row_hashes(sx: NDArray[np.float64], sy: NDArray[np.float64] | None) -> list[str]:
    out = []
    for i in range(sx.shape[0]):
        h = hashlib.sha256(np.ascontiguousarray(sx[i]).tobytes())
        if sy is not None and sy.shape[0] == sx.shape[0]:
            h.update(np.ascontiguousarray(sy[i]).tobytes())
        out.append(h.hexdigest())
    return out


def select_threshold(
    scores_x: ArrayLike, scores_y: ArrayLike, thresholds: ArrayLike, delta: float, *,
    level: float, order: int = 2, method: Method = "wilson",
    trial_indices: ArrayLike | None = None,
) -> ThresholdSelection:
    """Pick the tau of the grid maximising eps_hat on TUNING trials (LiDP App. E); returns no bound.

    Args:
        scores_x: ``(n, K)`` scores of included canaries on models trained with them.
        scores_y: ``(n', m)`` scores of fresh canaries on models trained without them.
        thresholds: ``(T,)`` candidate thresholds.
        delta, order, method: as in :func:`privaudit.stats.lidp_epsilon_lower_bound`.
        level: failure probability of the one-sided eps_hat each candidate is scored with, in
            (0, 1) (as in :func:`privaudit.stats.lidp_epsilon_lower_bound`); it only ranks the
            candidates, nothing is certified.
        trial_indices: ``(n,)`` distinct integer ids of the tuning trials (row i of ``scores_x``
            is trial ``trial_indices[i]``).  Recorded in the selection; :func:`certify_selected`
            then refuses exactly these ids.  Without it the rows' contents are fingerprinted.

    >>> rng = np.random.default_rng(0)
    >>> sel = select_threshold(rng.normal(2, 1, (200, 4)), rng.normal(0, 1, (200, 4)), [0.0, 1.0, 2.0], 1e-5,
    ...                        level=0.05)
    >>> sel.threshold in (0.0, 1.0, 2.0), sel.tuning_trials
    (True, 200)
    """
    sx, sy = _scores("scores_x", scores_x), _scores("scores_y", scores_y)
    grid = _grid(thresholds)
    delta = check_prob("delta", delta)
    level = check_prob("level", level, open_low=True, open_high=True)
    ids = None if trial_indices is None else _indices(trial_indices, sx.shape[0])
    curve = _epsilon_curve(sx, sy, grid, delta, level, order, method)
    best = int(np.argmax(curve))
    return ThresholdSelection(
        threshold=float(grid[best]),
        n_candidates=int(grid.size),
        tuning_trials=int(sx.shape[0]),
        tuning_row_hashes=frozenset(_row_hashes(sx, sy)) if ids is None else frozenset(),
        tuning_indices=ids,
    )


def certify_selected(
    selection: ThresholdSelection, scores_x: ArrayLike, scores_y: ArrayLike, delta: float, *,
    level: float, order: int = 2, method: Method = "wilson",
    trial_indices: ArrayLike | None = None,
) -> ThresholdCertificate:
    """Certify a previously selected tau on FRESH trials (Algorithm 1 lines 7-8 at that tau).

    Args:
        selection: from :func:`select_threshold`.
        scores_x, scores_y: ``(n, K)`` / ``(n', m)`` scores of the certification trials.
        delta, order, method: as in :func:`privaudit.stats.lidp_epsilon_lower_bound`.
        level: failure probability of the certified one-sided lower bound on epsilon, in (0, 1)
            (``level/2`` per XBern side, as in :func:`privaudit.stats.lidp_epsilon_lower_bound`).
        trial_indices: ``(n,)`` distinct integer ids of the certification trials.  Required when
            the selection was made with ``trial_indices``; only ids shared with the tuning trials
            are refused (equal scores are fine).

    Raises:
        ValueError: if any certification trial was among the tuning trials (same index; or, when
            the selection carries no indices, same row contents of ``scores_x`` with ``scores_y``).

    >>> rng = np.random.default_rng(0)
    >>> tune_x, tune_y = rng.normal(2, 1, (200, 4)), rng.normal(0, 1, (200, 4))
    >>> sel = select_threshold(tune_x, tune_y, np.linspace(-1, 3, 9), 1e-5, level=0.05)
    >>> cert = certify_selected(sel, rng.normal(2, 1, (200, 4)), rng.normal(0, 1, (200, 4)), 1e-5, level=0.05)
    >>> cert.strategy, cert.epsilon_lower_bound > 0
    ('split', True)
    >>> try:
    ...     certify_selected(sel, tune_x, tune_y, 1e-5, level=0.05)
    ... except ValueError as err:
    ...     print(str(err)[:69])
    scores_x/scores_y reuse 200 trial(s) used to select the threshold (ma
    >>> sel = select_threshold(tune_x, tune_y, [1.0], 1e-5, level=0.05, trial_indices=np.arange(200))
    >>> other = np.arange(200, 400)  # other trials that happen to have the same scores
    >>> certify_selected(sel, tune_x, tune_y, 1e-5, level=0.05, trial_indices=other).strategy
    'split'
    """
    sx, sy = _scores("scores_x", scores_x), _scores("scores_y", scores_y)
    delta = check_prob("delta", delta)
    level = check_prob("level", level, open_low=True, open_high=True)
    if selection.tuning_indices is not None:
        if trial_indices is None:
            raise ValueError(
                "the threshold was selected on indexed trials: pass trial_indices (the ids of the "
                "certification trials) so that reuse of a tuning trial can be checked"
            )
        shared = sorted(_indices(trial_indices, sx.shape[0]) & selection.tuning_indices)
        if shared:
            more = ", ..." if len(shared) > 10 else ""
            raise _reuse_error(len(shared), f"trial indices {shared[:10]}{more}")
    else:
        if trial_indices is not None:
            _indices(trial_indices, sx.shape[0])  # validated, but the selection has none to compare
        reused = sum(h in selection.tuning_row_hashes for h in _row_hashes(sx, sy))
        if reused:
            raise _reuse_error(
                reused, "matched by the rows' scores: pass trial_indices when distinct trials can have "
                "equal scores")
    eps = float(_epsilon_curve(sx, sy, np.array([selection.threshold]), delta, level, order, method)[0])
    return ThresholdCertificate(
        epsilon_lower_bound=eps, threshold=selection.threshold, strategy="split", level=level,
        n_candidates=selection.n_candidates, n_tune=selection.tuning_trials, n_certify=int(sx.shape[0]),
    )


def certify_split(
    scores_x: ArrayLike, scores_y: ArrayLike, thresholds: ArrayLike, delta: float,
    rng: np.random.Generator, tune_fraction: float = 0.5, *,
    level: float, order: int = 2, method: Method = "wilson",
) -> ThresholdCertificate:
    """Randomly split the trials, tune tau on one part and certify on the rest.

    ``scores_x`` and ``scores_y`` must come from the same n trials (row i of each from trial i).
    ``level`` is the failure probability of the certified one-sided lower bound on epsilon (as in
    :func:`certify_selected`).

    >>> rng = np.random.default_rng(1)
    >>> c = certify_split(rng.normal(2, 1, (400, 4)), rng.normal(0, 1, (400, 4)), np.linspace(-1, 3, 9), 1e-5, rng,
    ...                   level=0.05)
    >>> (c.n_tune, c.n_certify), c.epsilon_lower_bound > 0
    ((200, 200), True)
    """
    sx, sy = _scores("scores_x", scores_x), _scores("scores_y", scores_y)
    if sx.shape[0] != sy.shape[0]:
        raise ValueError(f"scores_x and scores_y must have one row per trial, got {sx.shape[0]} and {sy.shape[0]}")
    frac = check_prob("tune_fraction", tune_fraction, open_low=True, open_high=True)
    n = sx.shape[0]
    n_tune = int(round(frac * n))
    if n_tune < 1 or n_tune > n - 1:
        raise ValueError(f"tune_fraction={tune_fraction!r} leaves an empty part for n={n} trials")
    perm = rng.permutation(n)
    tune, cert = perm[:n_tune], perm[n_tune:]
    sel = select_threshold(sx[tune], sy[tune], thresholds, delta, level=level, order=order, method=method,
                           trial_indices=tune)
    return certify_selected(sel, sx[cert], sy[cert], delta, level=level, order=order, method=method,
                            trial_indices=cert)


def bonferroni_max(
    bound_fn: Callable[[T, float], float], candidates: Sequence[T], *, level: float
) -> tuple[float, T]:
    """``max_c bound_fn(c, level / len(candidates))`` and its argmax (union bound over candidates).

    If each ``bound_fn(c, b)`` is a lower bound failing with probability <= b, the maximum
    fails with probability <= level.

    Args:
        bound_fn: ``bound_fn(candidate, level_c)``, a one-sided bound failing with probability <= ``level_c``.
        candidates: the candidates, fixed before the data are seen (at least one).
        level: failure probability of the one-sided bound returned (the maximum), in (0, 1); each
            candidate gets ``level / len(candidates)``.

    >>> bonferroni_max(lambda c, b: c * (1 - b), [1.0, 2.0], level=0.1)
    (1.9, 2.0)
    """
    level = check_prob("level", level, open_low=True, open_high=True)
    n = len(candidates)
    check_int("len(candidates)", n, minimum=1)
    vals = [float(bound_fn(c, level / n)) for c in candidates]
    best = int(np.argmax(vals))
    return vals[best], candidates[best]


def certify_bonferroni(
    scores_x: ArrayLike, scores_y: ArrayLike, thresholds: ArrayLike, delta: float, *,
    level: float, order: int = 2, method: Method = "wilson",
) -> ThresholdCertificate:
    """Max over the tau grid of eps_hat(tau) computed at ``level / T`` (Bonferroni correction).

    Uses all trials for both choosing and certifying; valid because every candidate is certified
    at the corrected level -- provided the grid itself was fixed without looking at these trials
    (a grid of quantiles of the same scores is not; build it on separate pilot trials, as
    :func:`privaudit.audits.lidp.lidp_audit` does).  ``level`` is the failure probability of the
    certified one-sided lower bound (the maximum), in (0, 1); other arguments as in
    :func:`certify_selected`.

    >>> rng = np.random.default_rng(2)
    >>> c = certify_bonferroni(rng.normal(2, 1, (300, 4)), rng.normal(0, 1, (300, 4)), np.linspace(-1, 3, 9), 1e-5,
    ...                        level=0.05)
    >>> c.strategy, c.n_candidates, round(c.level, 4)
    ('bonferroni', 9, 0.05)
    """
    sx, sy = _scores("scores_x", scores_x), _scores("scores_y", scores_y)
    grid = _grid(thresholds)
    delta = check_prob("delta", delta)
    level = check_prob("level", level, open_low=True, open_high=True)
    curve = _epsilon_curve(sx, sy, grid, delta, level / grid.size, order, method)
    best = int(np.argmax(curve))
    eps = float(curve[best])
    return ThresholdCertificate(
        epsilon_lower_bound=eps, threshold=float(grid[best]),
        strategy="bonferroni", level=level, n_candidates=int(grid.size), n_tune=0, n_certify=int(sx.shape[0]),
    )
