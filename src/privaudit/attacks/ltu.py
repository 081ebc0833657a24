"""The Leave-Two-Unlabeled (LTU) evaluator (Pedersen et al. 2022, "Problem statement and methodology").

Each round draws one Defender sample d and one Reserved sample r, presents them to the
attacker as an unordered pair (u1, u2) in random order, and asks which one is the member.
The accuracy A_ltu over N rounds gives the global privacy score of Eq. (1); the individual
privacy score of a sample uses that sample in every round against all samples of the other
side (App. C).

Black-box attackers here see only the defender's per-sample outputs (losses); they receive
the two candidates' scores and nothing else that could leak the membership (not the row
order, not the ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from privaudit.stats import ltu_privacy

#: pairwise attacker: (score_u1, score_u2, rng) → 1 where u1 is guessed to be the member
PairAttacker = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


def loss_gap_attacker(loss_u1: np.ndarray, loss_u2: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Guess that the candidate with the lower loss is the member (Theorem 1); ties → coin flip.

    Args:
        loss_u1, loss_u2: (N,) per-sample losses of the two candidates.
    Returns:
        (N,) bool, True where u1 is guessed to be the Defender sample.
    """
    coin = rng.random(loss_u1.shape) < 0.5
    return np.where(loss_u1 == loss_u2, coin, loss_u1 < loss_u2)


ATTACKERS: dict[str, PairAttacker] = {"loss_gap": loss_gap_attacker}


@dataclass(frozen=True)
class LtuResult:
    """Outcome of N LTU rounds for one attacker."""

    attacker: str
    rounds: int
    accuracy: float
    privacy: float
    privacy_stderr: float

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "attacker": self.attacker,
            "rounds": self.rounds,
            "accuracy": self.accuracy,
            "privacy": self.privacy,
            "privacy_stderr": self.privacy_stderr,
        }


def ltu_rounds(
    loss_defender: np.ndarray, loss_reserved: np.ndarray, rounds: int, attacker: str, rng: np.random.Generator
) -> LtuResult:
    """Play ``rounds`` LTU rounds (vectorised) and score them with Eq. (1).

    Args:
        loss_defender: (n_D,) losses of the Defender samples.
        loss_reserved: (n_R,) losses of the Reserved samples.
        rounds: N ≥ 1 (``ltu.rounds``).
        attacker: a key of :data:`ATTACKERS` (``ltu.attackers``).
    """
    if rounds < 1:
        raise ValueError(f"ltu.rounds must be >= 1, got {rounds}")
    if attacker not in ATTACKERS:
        raise ValueError(f"ltu.attackers: unknown attacker {attacker!r}; allowed: {sorted(ATTACKERS)}")
    if len(loss_defender) == 0 or len(loss_reserved) == 0:
        raise ValueError("LTU needs at least one Defender and one Reserved sample")
    d = rng.integers(0, len(loss_defender), size=rounds)
    r = rng.integers(0, len(loss_reserved), size=rounds)
    d_first = rng.random(rounds) < 0.5  # the evaluator hides which candidate is which
    u1 = np.where(d_first, loss_defender[d], loss_reserved[r])
    u2 = np.where(d_first, loss_reserved[r], loss_defender[d])
    guess_u1 = ATTACKERS[attacker](u1, u2, rng)
    correct = guess_u1 == d_first
    acc = float(correct.mean())
    privacy, stderr = ltu_privacy(acc, rounds)
    return LtuResult(attacker, rounds, acc, privacy, stderr)


def individual_privacy_scores(loss_defender: np.ndarray, loss_reserved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact individual privacy scores of the loss-gap attacker (App. C).

    A Defender sample's attack accuracy is the share of Reserved samples with a higher loss
    (ties count 1/2), i.e. the LTU accuracy when that sample is used in every round and r
    ranges over all of D_R; symmetrically for Reserved samples. Scores are
    ``min(2(1 − acc), 1)`` as in Eq. (1).

    Returns:
        (scores_defender (n_D,), scores_reserved (n_R,)).
    """
    sorted_r = np.sort(loss_reserved)
    sorted_d = np.sort(loss_defender)
    # P(loss_r > loss_d) + 0.5 P(loss_r == loss_d), for each d
    above = len(sorted_r) - np.searchsorted(sorted_r, loss_defender, side="right")
    ties = np.searchsorted(sorted_r, loss_defender, side="right") - np.searchsorted(sorted_r, loss_defender, side="left")
    acc_d = (above + 0.5 * ties) / len(sorted_r)
    below = np.searchsorted(sorted_d, loss_reserved, side="left")
    ties_r = np.searchsorted(sorted_d, loss_reserved, side="right") - below
    acc_r = (below + 0.5 * ties_r) / len(sorted_d)
    return np.minimum(2 * (1 - acc_d), 1.0), np.minimum(2 * (1 - acc_r), 1.0)


def evaluate_defender(
    outputs: pd.DataFrame, rounds: int, attackers: list[str], rng: np.random.Generator
) -> tuple[dict[str, LtuResult], pd.DataFrame]:
    """Run every attacker against one defender's per-sample outputs.

    Args:
        outputs: per-sample outputs with columns ``id``, ``role``, ``loss``.
    Returns:
        (results by attacker, per-sample scores DataFrame with id, role, score).
    """
    is_def = outputs["role"].to_numpy() == "defender"
    loss = outputs["loss"].to_numpy(dtype=np.float64)
    results = {a: ltu_rounds(loss[is_def], loss[~is_def], rounds, a, rng) for a in attackers}
    s_def, s_res = individual_privacy_scores(loss[is_def], loss[~is_def])
    scores = pd.DataFrame({
        "id": np.concatenate([outputs["id"].to_numpy()[is_def], outputs["id"].to_numpy()[~is_def]]),
        "role": ["defender"] * int(is_def.sum()) + ["reserved"] * int((~is_def).sum()),
        "score": np.concatenate([s_def, s_res]),
    })
    return results, scores


def strongest(results: dict[str, LtuResult]) -> LtuResult:
    """The attacker with the highest accuracy (lowest privacy): the headline result."""
    return max(results.values(), key=lambda r: (r.accuracy, r.attacker))
