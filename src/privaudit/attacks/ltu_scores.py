"""Naive black-box LTU attackers on M_D's outputs (Pedersen et al. 2022, Fig. 2 branch (1)).

* score attackers (Theorem 1, eq. 3-5): a membership score s(x) from M_D's output on x;
  the candidate with the larger s is guessed to be the Defender sample, ties by a fair coin.
  ``loss_gap`` uses s = −loss (the paper's Gap-attacker); ``score_<f>`` for
  f ∈ {loss, confidence, entropy, margin}; ``score_best`` chooses f per round on the labelled
  part of D_A (the f with the best pairwise accuracy there, exact per round).
* ``bounded_loss`` (Theorem 2, App. A): the randomized strategy "u1 is Reserved with probability
  ℓ̃(u1)" with the bounded loss ℓ̃ = 1 − p_y(x) = 1 − exp(−cross-entropy) ∈ [0, 1]
  (a monotone rescaling of the training loss; its expected accuracy is 1/2 + (e_R − e_D)/2).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from privaudit.attacks.ltu import AttackTable, RoundBatch
from privaudit.losses import cross_entropy


def _p_true(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    return proba[np.arange(len(y)), y]


def _loss(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    return cross_entropy(proba, y)


def _confidence(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _p_true(proba, y)


def _entropy(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    p = np.clip(proba, 1e-300, 1.0)
    return (proba * np.log(p)).sum(axis=1)  # = −entropy


def _margin(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    other = proba.copy()
    other[np.arange(len(y)), y] = -np.inf
    return _p_true(proba, y) - other.max(axis=1)


#: membership scores s(x) (n,) from probabilities (n, C) and labels (n,): larger → member
SCORE_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "loss": lambda p, y: -_loss(p, y),
    "confidence": _confidence,
    "entropy": _entropy,
    "margin": _margin,
}


def bounded_loss(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ℓ̃(x) = 1 − p_y(x) ∈ [0, 1], the Theorem 2 rescaling of the cross-entropy (n,)."""
    return np.clip(1.0 - _p_true(proba, y), 0.0, 1.0)


def pairwise_guess(s_u1: np.ndarray, s_u2: np.ndarray) -> np.ndarray:
    """(N,) P[u1 member]: 1 where s(u1) > s(u2), 0 where smaller, 0.5 on ties (Theorem 1)."""
    return np.where(s_u1 > s_u2, 1.0, np.where(s_u1 < s_u2, 0.0, 0.5))


class ScoreAttacker:
    """Theorem 1 attacker with a fixed score f (vectorised over rounds)."""

    def __init__(self, name: str, score: str) -> None:
        if score not in SCORE_FUNCTIONS:
            raise ValueError(f"ltu.attackers: unknown score {score!r}; allowed: {sorted(SCORE_FUNCTIONS)}")
        self.name, self.score = name, score
        self.metrics_extra = {"score": score}

    def sample_scores(self, table: AttackTable) -> np.ndarray:
        """(n,) membership scores of every table row (no membership used)."""
        return SCORE_FUNCTIONS[self.score](table.proba, table.y)

    def guess(self, batch: RoundBatch) -> np.ndarray:
        s = self.sample_scores(batch.table)
        return pairwise_guess(s[batch.u1], s[batch.u2])


class BestScoreAttacker:
    """Theorem 1 attacker whose f is chosen per round on D_A (exact leave-two-out accuracies)."""

    name = "score_best"

    def __init__(self) -> None:
        self.metrics_extra: dict[str, object] = {}

    def guess(self, batch: RoundBatch) -> np.ndarray:
        names = sorted(SCORE_FUNCTIONS)
        scores = np.stack([SCORE_FUNCTIONS[f](batch.table.proba, batch.table.y) for f in names])
        # labelled accuracy of "larger −s → Reserved"
        acc = np.stack([batch.labelled_pair_accuracy(-s) for s in scores])  # (F, N)
        pick = acc.argmax(axis=0)
        rounds = np.arange(len(batch))
        s1, s2 = scores[pick, batch.u1[rounds]], scores[pick, batch.u2[rounds]]
        counts = np.bincount(pick, minlength=len(names))
        self.metrics_extra = {"score_chosen": {n: int(c) for n, c in zip(names, counts)}}
        return pairwise_guess(s1, s2)


class BoundedLossAttacker:
    """Theorem 2 randomized attacker: u1 is Reserved with probability ℓ̃(u1) = 1 − p_y(u1)."""

    name = "bounded_loss"
    metrics_extra = {"bounded_loss": "1 - p_y(x) = 1 - exp(-cross_entropy)"}

    def guess(self, batch: RoundBatch) -> np.ndarray:
        lt = bounded_loss(batch.table.proba, batch.table.y)[batch.u1]
        z = batch.table.rng.random(len(batch))
        return np.where(z < lt, 0.0, 1.0)
