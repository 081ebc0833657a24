"""The Game-3 adversary (Malek et al. 2021, App. B): abstain below τ, else guess the more
confident of the two candidate labels (:func:`game3_guesses`); the reliability-weighted ACGR
counts over all C−2 alternative labels (:func:`acgr_counts`).

The audit that turns these guesses into an ε interval at the defender's share of ``gate.beta``
(honest τ, Clopper-Pearson and ACGR, Theorem B.1) is :mod:`privaudit.audits.game3`; the statistics
are :mod:`privaudit.stats.game3`.
"""

from __future__ import annotations

import numpy as np



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
