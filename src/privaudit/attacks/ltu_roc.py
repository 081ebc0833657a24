"""ROC curves, AUC and TPR at low FPR of per-sample membership scores (LiRA convention).

Membership is the positive class; a score is larger for likely members. TPR at a target FPR is
the largest TPR among thresholds whose FPR does not exceed the target (no interpolation), the
conservative reading of Carlini et al. 2022, Fig. 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

#: FPR grid the stored curves are downsampled to (≤ 200 points, dense at low FPR)
_GRID = np.unique(np.concatenate([[0.0], np.logspace(-4, 0, 150), np.linspace(0, 1, 49)]))


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, target: float) -> float:
    """Largest TPR with FPR ≤ ``target`` on an ROC curve (fpr, tpr non-decreasing)."""
    ok = fpr <= target + 1e-15
    return float(tpr[ok].max()) if ok.any() else 0.0


def roc_summary(scores: np.ndarray, is_member: np.ndarray, max_points: int = 200) -> dict[str, Any]:
    """``{fpr, tpr, auc, tpr_at_0_1pct, tpr_at_1pct}`` with the curve downsampled to ≤ ``max_points``.

    Args:
        scores: (n,) membership scores; is_member: (n,) bool truth.
    """
    scores, is_member = np.asarray(scores, np.float64), np.asarray(is_member, bool)
    if is_member.all() or not is_member.any():
        raise ValueError("ROC needs both members and non-members")
    if not np.all(np.isfinite(scores)):
        raise ValueError("membership scores must be finite for the ROC")
    fpr, tpr, _ = roc_curve(is_member, scores)
    grid = _GRID if len(_GRID) <= max_points else np.linspace(0, 1, max_points)
    idx = np.searchsorted(fpr, grid, side="right") - 1
    return {
        "fpr": [float(x) for x in grid],
        "tpr": [float(x) for x in tpr[np.clip(idx, 0, len(tpr) - 1)]],
        "auc": float(roc_auc_score(is_member, scores)),
        "tpr_at_0_1pct": tpr_at_fpr(fpr, tpr, 0.001),
        "tpr_at_1pct": tpr_at_fpr(fpr, tpr, 0.01),
    }
