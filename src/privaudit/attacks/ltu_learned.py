"""The learned black-box LTU attacker M_A (Pedersen et al. 2022, Fig. 2 branch (2)).

A membership classifier on features of M_D's output vector (loss, confidence, entropy, margin,
correctness, top-3 sorted probabilities), trained on the labelled part of D_A and applied to
the two candidates; the candidate with the higher predicted membership probability is the
guessed member.

Modes (``ltu.learned_mode``):

* ``exact``: M_A retrained per round on that round's D_A (the LTU protocol as stated);
* ``one_split``: the Discussion's cheaper variant: M_A trained once on a random half of the
  samples that are labelled in every round of the batch (never a candidate), then used for all
  rounds; labelled as such in ``metrics/ltu.json`` (``mode``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privaudit.attacks.ltu import RoundBatch
from privaudit.attacks.ltu_scores import SCORE_FUNCTIONS


def output_features(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n, 8) attack features of M_D's outputs: 4 scores, correct, top-3 sorted probabilities."""
    cols = [SCORE_FUNCTIONS[f](proba, y) for f in ("loss", "confidence", "entropy", "margin")]
    cols.append((proba.argmax(axis=1) == y).astype(np.float64))
    top = -np.sort(-proba, axis=1)[:, :3]
    if top.shape[1] < 3:
        top = np.pad(top, ((0, 0), (0, 3 - top.shape[1])))
    return np.column_stack(cols + [top])


def _classifier() -> Any:
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))


def _fit_predict(F: np.ndarray, rows: np.ndarray, labels: np.ndarray, query: np.ndarray) -> np.ndarray:
    if len(np.unique(labels)) < 2:
        return np.full(len(query), 0.5)
    return _classifier().fit(F[rows], labels).predict_proba(F[query])[:, 1]


class LearnedAttacker:
    """Membership classifier on M_D's outputs (``exact`` per round or ``one_split``)."""

    name = "learned"

    def __init__(self, mode: str = "exact") -> None:
        if mode not in ("exact", "one_split"):
            raise ValueError(f"ltu.learned_mode must be 'exact' or 'one_split', got {mode!r}")
        self.mode = mode
        self.metrics_extra = {"mode": mode, "model": "standardised logistic regression on 8 output features"}

    def guess(self, batch: RoundBatch) -> np.ndarray:
        t = batch.table
        F = output_features(t.proba, t.y)
        n_rounds = len(batch)
        if self.mode == "exact":
            p = np.empty((n_rounds, 2))
            for k in range(n_rounds):
                m = batch.membership(k)
                rows = np.flatnonzero(m >= 0)
                p[k] = _fit_predict(F, rows, m[rows], np.array([batch.u1[k], batch.u2[k]]))
        else:
            never = np.setdiff1d(np.arange(t.n), np.concatenate([batch.u1, batch.u2]))
            m = batch.membership(0)
            train = t.rng.permutation(never)[: max(2, len(never) // 2)]
            q = np.concatenate([batch.u1, batch.u2])
            pq = _fit_predict(F, train, m[train], q)
            p = np.column_stack([pq[:n_rounds], pq[n_rounds:]])
        return np.where(p[:, 0] > p[:, 1], 1.0, np.where(p[:, 0] < p[:, 1], 0.0, 0.5))


def crossfit_scores(proba: np.ndarray, y: np.ndarray, is_member: np.ndarray, seed: int, folds: int = 5) -> np.ndarray:
    """(n,) out-of-fold membership probabilities of M_A (for ROC / individual scores only)."""
    F = output_features(proba, y)
    out = np.empty(len(y))
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for tr, te in skf.split(F, is_member):
        out[te] = _fit_predict(F, tr, is_member[tr].astype(int), te)
    return out
