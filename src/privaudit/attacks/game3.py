"""The Game-3 adversary (Malek et al. 2021, App. B): abstain below τ, else guess the more
confident of the two candidate labels; ε via Theorem B.1 from Clopper-Pearson and from the
reliability-weighted ACGR over all C−2 alternative labels.

τ is chosen honestly: the canaries are split at random into a tuning half, on which τ is
picked from the grid ``[game3.tau_min, game3.tau_max]``, and a certification half, on which
the reported interval is computed. (The paper reports the best τ on all canaries "omitting
corrections for multiple hypothesis testing"; we do not.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.stats import acgr_epsilon, game3_epsilon


def game3_guesses(
    proba: np.ndarray, label_pair: np.ndarray, bit: np.ndarray, taus: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The abstaining adversary for every canary and every τ at once.

    Args:
        proba: (N, C) model probabilities on the canaries.
        label_pair: (N, 2) candidate labels (y', y''); bit: (N,) which one was trained on.
        taus: (T,) thresholds.
    Returns:
        (guessed (T, N) bool — not abstained, correct (T, N) bool — guessed and right).
    """
    n = len(bit)
    p0 = proba[np.arange(n), label_pair[:, 0]]
    p1 = proba[np.arange(n), label_pair[:, 1]]
    guess_bit = (p1 > p0).astype(int)
    guessed = np.maximum(p0, p1)[None, :] >= taus[:, None]
    correct = guessed & (guess_bit == bit)[None, :]
    return guessed, correct


def acgr_counts(
    proba: np.ndarray, true_label: np.ndarray, trained_label: np.ndarray, tau: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-canary counts over all C−2 alternatives y ∉ {y_i, trained label} (App. B, ACGR_i).

    For each alternative the adversary compares the trained label with it; it is right when
    the trained label is the more confident, and abstains when both are below τ.
    Returns (correct_per_canary (N,), guesses_per_canary (N,)).
    """
    n, c = proba.shape
    rows = np.arange(n)
    p_trained = proba[rows, trained_label][:, None]
    alt_mask = np.ones((n, c), dtype=bool)
    alt_mask[rows, true_label] = False
    alt_mask[rows, trained_label] = False
    guessed = alt_mask & (np.maximum(proba, p_trained) >= tau)
    correct = guessed & (p_trained > proba)
    return correct.sum(axis=1), guessed.sum(axis=1)


def game3_audit(run: dict[str, np.ndarray], taus: np.ndarray, alpha: float, rng: np.random.Generator) -> dict[str, Any]:
    """ε interval of one Game-3 run, τ tuned on half of the canaries and certified on the rest.

    Args:
        run: arrays of :class:`privaudit.canaries.experiments.Game3Run`.
        taus: (T,) threshold grid in [0.5, 1].
        alpha: two-sided miss probability of each interval.
    Returns:
        ``{eps_low, eps_high, canaries, certified_canaries, tau, guesses, correct,
        acgr: {eps_low, eps_high}, tau_selection}``.
    """
    proba, pair, bit = run["proba"], run["label_pair"], run["bit"]
    n = len(bit)
    if n < 4:
        raise ValueError(f"game3.canaries must be >= 4 to tune and certify on separate halves, got {n}")
    perm = rng.permutation(n)
    tune, cert = perm[: n // 2], perm[n // 2:]
    guessed, correct = game3_guesses(proba, pair, bit, taus)
    tune_low = [
        game3_epsilon(int(correct[t, tune].sum()), int(guessed[t, tune].sum()), alpha)[0]
        if guessed[t, tune].any() else -1.0
        for t in range(len(taus))
    ]
    t_best = int(np.argmax(tune_low))
    tau = float(taus[t_best])
    g, c = int(guessed[t_best, cert].sum()), int(correct[t_best, cert].sum())
    eps_low, eps_high = game3_epsilon(c, g, alpha) if g > 0 else (0.0, float("inf"))
    trained = pair[np.arange(n), bit]
    c_i, g_i = acgr_counts(proba[cert], run["true_label"][cert], trained[cert], tau)
    acgr_low, acgr_high = acgr_epsilon(c_i, g_i, alpha) if g_i.sum() > 0 else (0.0, float("inf"))
    return {
        "eps_low": eps_low,
        "eps_high": eps_high,
        "canaries": n,
        "certified_canaries": len(cert),
        "tau": tau,
        "guesses": g,
        "correct": c,
        "alpha": alpha,
        "acgr": {"eps_low": acgr_low, "eps_high": acgr_high},
        "tau_selection": "tau tuned on a random half of the canaries, interval certified on the other half",
    }
