"""The Leave-Two-Unlabeled (LTU) evaluator (Pedersen et al. 2022, "Problem statement and methodology").

Each round draws one Defender sample d and one Reserved sample r and hands the attacker the
attack data D_A = D_D − {membership(d)} ∪ D_R − {membership(r)}: every sample with its
membership except d and r, which come back as the unordered pair (u1, u2) in random order.
The attacker also knows the trainer T_D (spec, public seed) and the trained model M_D. Its
accuracy A_ltu over N rounds gives the global privacy score of Eq. (1).

Leakage rules enforced here (tested in ``tests/attacks/test_ltu_evaluator.py``):

* attackers see an :class:`AttackTable` whose rows are a random permutation of all samples,
  without ids, so a row's position says nothing about its membership;
* a round's membership vector (:meth:`RoundBatch.membership`) marks both candidates −1;
* which candidate is u1 is a fair coin per round.

The Defender's training order (public in the "fixed" randomness level of Table 1) is exposed
per round with the hidden sample's slot marked −1 (:meth:`RoundBatch.train_order`); the slot
says nothing about which candidate fills it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from privaudit.defenders.base import Defender
from privaudit.losses import cross_entropy
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.stats import ltu_privacy


@dataclass(frozen=True)
class LtuData:
    """What the evaluator holds about one defender (truth included; never given to attackers).

    Attributes:
        X: (n, d) float32 features; y: (n,) int64 labels; proba: (n, C) M_D's probabilities.
        is_defender: (n,) bool membership truth.
        ids: (n,) sample ids (for the per-sample scores file only).
        train_rows: (n_D,) row indices of the Defender samples in M_D's training order.
        spec: the defender spec (T_D with its public settings) or None.
        model: the trained M_D (white-box attackers) or None.
        n_classes: C.
        reference_cache: evaluator-side store of Reserved-side reference models (data row order),
            so that ``lira`` and ``rmia`` against one defender share one set of trainings
            (:meth:`RoundBatch.reference_pool`); None: every attacker trains its own.
    """

    X: np.ndarray
    y: np.ndarray
    proba: np.ndarray
    is_defender: np.ndarray
    ids: np.ndarray
    train_rows: np.ndarray
    n_classes: int
    spec: DefenderSpecBase | None = None
    model: Defender | None = None
    reference_cache: dict[Any, Any] | None = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_outputs(cls, proba: np.ndarray, y: np.ndarray, is_defender: np.ndarray,
                     ids: np.ndarray | None = None, X: np.ndarray | None = None, **kw: Any) -> "LtuData":
        """Black-box data (features optional): rows in any order, Defender training order = row order."""
        n = len(y)
        return cls(
            X=np.zeros((n, 0), np.float32) if X is None else X, y=np.asarray(y, np.int64),
            proba=np.asarray(proba, np.float64), is_defender=np.asarray(is_defender, bool),
            ids=np.arange(n).astype(str) if ids is None else np.asarray(ids),
            train_rows=np.flatnonzero(is_defender), n_classes=proba.shape[1], **kw,
        )


@dataclass(frozen=True)
class AttackTable:
    """All samples, rows randomly permuted, no ids: what every LTU attacker may read.

    Attributes: X (n, d), y (n,), proba (n, C) of M_D, loss (n,) = −log p_y, n_classes,
    spec (T_D), model (M_D), plus ``rng`` for the attacker's own randomness.
    """

    X: np.ndarray
    y: np.ndarray
    proba: np.ndarray
    loss: np.ndarray
    n_classes: int
    spec: DefenderSpecBase | None
    model: Defender | None
    rng: np.random.Generator

    @property
    def n(self) -> int:
        return len(self.y)


class RoundBatch:
    """N LTU rounds over one :class:`AttackTable`; candidate rows ``u1``, ``u2`` are (N,) arrays.

    The truth lives in the evaluator's private arrays; attackers use only the public methods,
    which mark both candidates of a round as unlabelled.
    """

    def __init__(self, table: AttackTable, u1: np.ndarray, u2: np.ndarray,
                 _member: np.ndarray, _train_rows: np.ndarray, _slot: np.ndarray,
                 _perm: np.ndarray | None = None, _cache: dict[Any, Any] | None = None) -> None:
        self.table = table
        self.u1 = u1
        self.u2 = u2
        self.__member = _member          # (n,) int8 truth 1/0 (name-mangled, not for attackers)
        self.__train_rows = _train_rows  # (n_D,) table rows in training order
        self.__slot = _slot              # (N,) training slot of each round's d
        self.__perm = _perm              # (n,) table row → data row (evaluator side)
        self.__cache = _cache            # shared reference models in data row order

    def __len__(self) -> int:
        return len(self.u1)

    def membership(self, k: int) -> np.ndarray:
        """(n,) int8 labels of round k's D_A: 1 Defender, 0 Reserved, −1 the two candidates."""
        m = self.__member.copy()
        m[[self.u1[k], self.u2[k]]] = -1
        return m

    def train_order(self, k: int) -> np.ndarray:
        """(n_D,) table rows of D_D in T_D's training order; −1 at the hidden sample's slot."""
        rows = self.__train_rows.copy()
        rows[self.__slot[k]] = -1
        return rows

    def labelled_rows(self, k: int, side: str) -> np.ndarray:
        """Rows labelled ``side`` ("defender" | "reserved") in round k's D_A (sorted)."""
        m = self.membership(k)
        return np.flatnonzero(m == (1 if side == "defender" else 0))

    def reference_pool(self, count: int, fraction: float, n_jobs: int | Literal["auto"] = 1, device: str = "cpu") -> Any:
        """Reference models of T_D on random ``fraction`` subsets of D_R (offline LiRA / RMIA).

        Returns a :class:`privaudit.attacks.mia_reference.ReferencePool` that hides, in each
        round, the models trained on that round's hidden Reserved sample. The models depend only
        on D_R, never on a round, so the evaluator keeps them (in data row order) for the next
        attacker against the same defender (``LtuData.reference_cache``): ``lira`` and ``rmia``
        share one set of trainings, each with its own per-round masking.
        """
        from privaudit.attacks.mia_reference import ReferencePool, train_reference_confidences

        t = self.table
        if t.spec is None or t.X.shape[1] == 0:
            raise ValueError("reference models need the defender spec and the features (--features/--split)")
        member = self.__member.astype(bool)
        key = ("reserved_reference", int(count), float(fraction))
        perm, cache = self.__perm, self.__cache
        if cache is not None and perm is not None and key in cache:
            conf_d, inside_d = cache[key]
            conf, inside = conf_d[perm], inside_d[perm]
        else:
            conf, inside = train_reference_confidences(t.spec, t.n_classes, t.X, t.y, np.flatnonzero(~member),
                                                       count, fraction, t.rng, n_jobs, device=device)
            if cache is not None and perm is not None:
                conf_d, inside_d = np.empty_like(conf), np.empty_like(inside)
                conf_d[perm], inside_d[perm] = conf, inside
                cache[key] = (conf_d, inside_d)
        r_row = np.where(member[self.u1], self.u2, self.u1)
        return ReferencePool(conf, inside, ~inside[r_row])

    def labelled_pair_accuracy(self, f: np.ndarray) -> np.ndarray:
        """(N,) exact Theorem 1 accuracy of score ``f`` (n,) (larger f → Reserved) on each
        round's labelled part (D_D − {d}) × (D_R − {r}); a function of D_A only, computed by
        leave-two-out updates of the full pairwise counts (eq. 3-5)."""
        f = np.asarray(f, np.float64)
        mem = self.__member.astype(bool)
        fd, fr = np.sort(f[mem]), np.sort(f[~mem])
        # wins(x vs set): count of set values < x plus half the ties
        def _below(sorted_vals: np.ndarray, x: np.ndarray) -> np.ndarray:
            lo = np.searchsorted(sorted_vals, x, "left")
            hi = np.searchsorted(sorted_vals, x, "right")
            return lo + 0.5 * (hi - lo)
        total = _below(fd, fr).sum()  # Σ_r [f(d) < f(r)] + ½ ties
        d_row = np.where(mem[self.u1], self.u1, self.u2)
        r_row = np.where(mem[self.u1], self.u2, self.u1)
        fdk, frk = f[d_row], f[r_row]
        contrib_r = _below(fd, frk)                 # pairs (·, r)
        contrib_d = len(fr) - (np.searchsorted(fr, fdk, "right") + np.searchsorted(fr, fdk, "left")) / 2.0
        pair = np.where(fdk < frk, 1.0, np.where(fdk == frk, 0.5, 0.0))
        good = total - contrib_r - contrib_d + pair
        return good / ((len(fd) - 1) * (len(fr) - 1))


class LtuAttacker(Protocol):
    """An LTU attacker: ``guess(batch)`` → (N,) P[u1 is the Defender sample] per round
    (1.0 / 0.0 for hard guesses, 0.5 for a coin; the evaluator breaks 0.5 with a fair coin)."""

    name: str

    def guess(self, batch: RoundBatch) -> np.ndarray: ...


@dataclass
class LtuResult:
    """Outcome of N LTU rounds for one attacker (Eq. 1), plus its extras (mode, bounds, roc)."""

    attacker: str
    rounds: int
    accuracy: float
    privacy: float
    privacy_stderr: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accuracy_stderr(self) -> float:
        return float(np.sqrt(self.accuracy * (1 - self.accuracy) / self.rounds))

    def as_dict(self) -> dict[str, Any]:
        return {"attacker": self.attacker, "rounds": self.rounds, "accuracy": self.accuracy,
                "accuracy_stderr": self.accuracy_stderr, "privacy": self.privacy,
                "privacy_stderr": self.privacy_stderr, **self.extra}


def make_table(data: LtuData, rng: np.random.Generator) -> tuple[AttackTable, np.ndarray]:
    """Permute rows at random (dropping ids); return the table and ``perm`` (table row j = data row perm[j])."""
    perm = rng.permutation(len(data.y))
    proba = data.proba[perm]
    table = AttackTable(
        X=data.X[perm], y=data.y[perm], proba=proba, loss=cross_entropy(proba, data.y[perm]),
        n_classes=data.n_classes, spec=data.spec, model=data.model,
        rng=np.random.default_rng(rng.integers(2**63)),
    )
    return table, perm


@dataclass(frozen=True)
class RoundTruth:
    """The evaluator's side of a batch: d_first (N,) bool "u1 is d"; perm (n,) table row → data row."""

    d_first: np.ndarray
    perm: np.ndarray


def draw_rounds(data: LtuData, rounds: int, rng: np.random.Generator,
                defender_rows: np.ndarray | None = None, reserved_rows: np.ndarray | None = None) -> tuple[RoundBatch, RoundTruth]:
    """Draw N rounds (d uniform over Defender, r over Reserved unless fixed by the caller).

    Returns:
        (the attacker's :class:`RoundBatch`, the evaluator's :class:`RoundTruth`).

    Args:
        defender_rows / reserved_rows: optional (N,) data rows to use as d / r (individual scores).
    """
    if rounds < 1:
        raise ValueError(f"ltu.rounds must be >= 1, got {rounds}")
    dset, rset = np.flatnonzero(data.is_defender), np.flatnonzero(~data.is_defender)
    if len(dset) < 2 or len(rset) < 2:
        raise ValueError(f"LTU needs at least two Defender and two Reserved samples, got {len(dset)} and {len(rset)}")
    table, perm = make_table(data, rng)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    d = dset[rng.integers(0, len(dset), rounds)] if defender_rows is None else np.asarray(defender_rows)
    r = rset[rng.integers(0, len(rset), rounds)] if reserved_rows is None else np.asarray(reserved_rows)
    d_first = rng.random(rounds) < 0.5
    u1 = np.where(d_first, inv[d], inv[r])
    u2 = np.where(d_first, inv[r], inv[d])
    slot_of = np.full(len(perm), -1)
    slot_of[data.train_rows] = np.arange(len(data.train_rows))
    batch = RoundBatch(table, u1, u2, _member=data.is_defender[perm].astype(np.int8),
                       _train_rows=inv[data.train_rows], _slot=slot_of[d], _perm=perm, _cache=data.reference_cache)
    return batch, RoundTruth(d_first, perm)


def score_rounds(p_u1: np.ndarray, d_first: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(N,) bool correctness of guesses; P = 0.5 → fair coin, otherwise u1 guessed iff P > 0.5."""
    p_u1 = np.asarray(p_u1, np.float64)
    coin = rng.random(len(p_u1)) < 0.5
    guess_u1 = np.where(p_u1 == 0.5, coin, p_u1 > 0.5)
    return guess_u1 == d_first


def run_attacker(attacker: LtuAttacker, data: LtuData, rounds: int,
                 rng: np.random.Generator) -> tuple[LtuResult, RoundBatch, RoundTruth]:
    """Play N LTU rounds with one attacker and score them with Eq. (1)."""
    batch, truth = draw_rounds(data, rounds, rng)
    d_first = truth.d_first
    p = np.asarray(attacker.guess(batch), np.float64)
    if p.shape != (rounds,):
        raise ValueError(f"attacker {attacker.name!r} returned shape {p.shape}, expected ({rounds},)")
    correct = score_rounds(p, d_first, rng)
    acc = float(correct.mean())
    privacy, stderr = ltu_privacy(acc, rounds)
    extra = dict(getattr(attacker, "metrics_extra", {}) or {})
    return LtuResult(attacker.name, rounds, acc, privacy, stderr, extra), batch, truth


def individual_privacy_scores(score_defender: np.ndarray, score_reserved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact individual privacy scores of a pairwise attacker with membership score s (App. C).

    A Defender sample used in every round against r ~ D_R is caught with probability
    P[s(r) < s(d)] + ½ P[s(r) = s(d)] (the N → ∞ limit of "all rounds use that sample");
    symmetrically for a Reserved sample. Scores = ``min(2(1 − acc), 1)`` as in Eq. (1).

    Args:
        score_defender: (n_D,) membership scores (higher = member); score_reserved: (n_R,).
    Returns:
        (scores_defender (n_D,), scores_reserved (n_R,)).
    """
    sr, sd = np.sort(score_reserved), np.sort(score_defender)
    lo, hi = np.searchsorted(sr, score_defender, "left"), np.searchsorted(sr, score_defender, "right")
    acc_d = (lo + 0.5 * (hi - lo)) / len(sr)
    lo, hi = np.searchsorted(sd, score_reserved, "left"), np.searchsorted(sd, score_reserved, "right")
    acc_r = (len(sd) - hi + 0.5 * (hi - lo)) / len(sd)
    return np.minimum(2 * (1 - acc_d), 1.0), np.minimum(2 * (1 - acc_r), 1.0)


def strongest(results: dict[str, LtuResult]) -> LtuResult:
    """The attacker with the highest accuracy (lowest privacy): the headline result."""
    if not results:
        raise ValueError("ltu.attackers produced no applicable result")
    return max(results.values(), key=lambda r: (r.accuracy, r.attacker))
