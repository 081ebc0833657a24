"""LTU evaluator: leakage rules, Eq. 1 / App. C numbers, exact leave-two-out statistics, ROC."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.attacks.ltu import LtuData, RoundBatch, draw_rounds, individual_privacy_scores, run_attacker
from privaudit.attacks.ltu_roc import roc_summary, tpr_at_fpr
from privaudit.attacks.ltu_scores import BoundedLossAttacker, ScoreAttacker, bounded_loss
from privaudit.stats import ltu_pairwise_accuracy, ltu_privacy


def _data(n: int = 200, gap: float = 1.0, seed: int = 0) -> LtuData:
    """Binary toy outputs: Defender samples get higher p_y (confidence) by ``gap`` in logit."""
    rng = np.random.default_rng(seed)
    is_def = np.arange(2 * n) < n
    logit = rng.normal(size=2 * n) + gap * is_def
    p1 = 1 / (1 + np.exp(-logit))
    y = np.ones(2 * n, np.int64)
    X = rng.normal(size=(2 * n, 3)).astype(np.float32)
    return LtuData.from_outputs(np.column_stack([1 - p1, p1]), y, is_def, X=X)


class _OrderCheat:
    """Tries to exploit row order: u1 is the member iff its row comes first."""

    name = "order_cheat"

    def guess(self, b: RoundBatch) -> np.ndarray:
        return (b.u1 < b.u2).astype(float)


class _LabelCheat:
    """Tries to read the hidden membership labels of the candidates."""

    name = "label_cheat"

    def guess(self, b: RoundBatch) -> np.ndarray:
        out = np.empty(len(b))
        for k in range(len(b)):
            m = b.membership(k)
            out[k] = 1.0 if m[b.u1[k]] == 1 else (0.0 if m[b.u1[k]] == 0 else 0.5)
        return out


class _SlotCheat:
    """Tries the training order: u1 is the member iff it sits right after the hidden slot's neighbour."""

    name = "slot_cheat"

    def guess(self, b: RoundBatch) -> np.ndarray:
        out = np.empty(len(b))
        for k in range(len(b)):
            order = b.train_order(k)
            assert b.u1[k] not in order and b.u2[k] not in order
            slot = int(np.flatnonzero(order < 0)[0])
            out[k] = float(order[slot - 1] < b.u1[k]) if slot else 0.5
        return out


@pytest.mark.parametrize("cheat", [_OrderCheat(), _LabelCheat(), _SlotCheat()])
def test_cheating_attackers_get_chance(cheat: object) -> None:
    data = _data(n=300, gap=3.0)  # strongly separable: an honest attacker would be near 1
    res, batch, _ = run_attacker(cheat, data, 2000, np.random.default_rng(1))  # type: ignore[arg-type]
    assert abs(res.accuracy - 0.5) < 4 * 0.5 / np.sqrt(2000)
    assert not hasattr(batch.table, "ids") and not hasattr(batch, "ids")


def test_membership_hides_exactly_the_two_candidates() -> None:
    data = _data(n=50)
    batch, truth = draw_rounds(data, 30, np.random.default_rng(0))
    member_table = data.is_defender[truth.perm]
    for k in range(len(batch)):
        m = batch.membership(k)
        hidden = np.flatnonzero(m < 0)
        assert sorted(hidden) == sorted([batch.u1[k], batch.u2[k]])
        rest = np.setdiff1d(np.arange(len(m)), hidden)
        assert np.array_equal(m[rest] == 1, member_table[rest])
        assert member_table[batch.u1[k]] == truth.d_first[k] and member_table[batch.u2[k]] != truth.d_first[k]
    assert 0.3 < truth.d_first.mean() < 0.7


def test_labelled_pair_accuracy_matches_naive_recomputation() -> None:
    data = _data(n=40, gap=0.7, seed=3)
    batch, _ = draw_rounds(data, 25, np.random.default_rng(5))
    f = np.round(batch.table.loss, 1)  # with ties
    fast = batch.labelled_pair_accuracy(f)
    for k in range(len(batch)):
        m = batch.membership(k)
        naive = ltu_pairwise_accuracy(f[m == 0], f[m == 1])
        assert fast[k] == pytest.approx(naive, abs=1e-12)


def test_eq1_on_a_perfectly_separable_defender() -> None:
    res, _, _ = run_attacker(ScoreAttacker("loss_gap", "loss"), _data(n=100, gap=50.0), 400, np.random.default_rng(0))
    assert res.accuracy == 1.0 and res.privacy == 0.0 and res.privacy_stderr == 0.0
    assert ltu_privacy(0.75, 100) == (0.5, pytest.approx(0.0866025403784))


def test_individual_scores_app_c_example() -> None:
    # App. C: f = P(reserved); f(d) = (0.1, 0.3, c), f(r) = (0.4, 0.7, 0.9); membership score = −f
    fr = np.array([0.4, 0.7, 0.9])
    for c, total in ((0.6, 8), (0.8, 7), (0.95, 6)):
        fd = np.array([0.1, 0.3, c])
        sd, sr = individual_privacy_scores(-fd, -fr)
        acc_d = np.array([(fr > x).mean() for x in fd])
        acc_r = np.array([(fd < x).mean() for x in fr])
        assert acc_d.sum() * 3 == pytest.approx(total)  # the 9 LTU pairs: accuracy total / 9
        assert np.allclose(sd, np.minimum(2 * (1 - acc_d), 1)) and np.allclose(sr, np.minimum(2 * (1 - acc_r), 1))
    assert np.allclose(individual_privacy_scores(np.array([1.0]), np.array([1.0])), [[1.0], [1.0]])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 2.0), st.integers(5, 40))
def test_loss_gap_accuracy_is_the_exact_pairwise_probability_in_expectation(seed: int, gap: float, n: int) -> None:
    data = _data(n=n, gap=gap, seed=seed)
    loss = -np.log(data.proba[:, 1])
    rounds = 4000
    res, _, _ = run_attacker(ScoreAttacker("loss_gap", "loss"), data, rounds, np.random.default_rng(seed + 1))
    exact = ltu_pairwise_accuracy(loss[~data.is_defender], loss[data.is_defender])
    assert abs(res.accuracy - exact) < 4.5 * np.sqrt(0.25 / rounds)


def test_bounded_loss_achieves_theorem2_value_in_expectation() -> None:
    data = _data(n=200, gap=1.5, seed=2)
    bl = bounded_loss(data.proba, data.y)
    expected = 0.5 + 0.5 * (bl[~data.is_defender].mean() - bl[data.is_defender].mean())
    res, _, _ = run_attacker(BoundedLossAttacker(), data, 20000, np.random.default_rng(4))
    assert abs(res.accuracy - expected) < 4 * np.sqrt(0.25 / 20000)
    assert expected > 0.55


def test_roc_on_a_constructed_case() -> None:
    # 1000 non-members with scores 0..999; 100 members: 5 above every non-member, 95 at the bottom
    scores = np.concatenate([np.arange(1000.0), [5000.0] * 5 + [-1.0] * 95])
    member = np.arange(1100) >= 1000
    s = roc_summary(scores, member)
    assert s["tpr_at_0_1pct"] == pytest.approx(0.05)   # FPR 0.1 % = 1 non-member above threshold
    assert s["tpr_at_1pct"] == pytest.approx(0.05)
    assert s["auc"] == pytest.approx(0.05)             # P[member > non-member]
    assert len(s["fpr"]) <= 200 and s["fpr"][0] == 0.0 and s["tpr"][-1] == 1.0
    perfect = roc_summary(np.r_[np.zeros(10), np.ones(10)], np.r_[np.zeros(10, bool), np.ones(10, bool)])
    assert perfect["auc"] == 1.0 and perfect["tpr_at_0_1pct"] == 1.0
    assert tpr_at_fpr(np.array([0.0, 0.002, 1.0]), np.array([0.3, 0.6, 1.0]), 0.001) == 0.3
