"""The DP-SGD Poisson sampler of the batched trainer (geometric gaps) is Poisson sampling.

Each valid row of each model must be in the batch independently with probability q (opacus's
``UniformWithReplacementSampler``), never an invalid row, reproducibly from the generator.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privaudit.train.batched import poisson_batches, poisson_rows, valid_row_table


def _masks(valid: torch.Tensor, q: float, steps: int, seed: int = 0) -> np.ndarray:
    table, n_valid = valid_row_table(valid)
    gen = torch.Generator().manual_seed(seed)
    out = np.zeros((steps, *valid.shape), dtype=bool)
    for s in range(steps):
        m, j, counts = poisson_rows(table, n_valid, q, gen)
        out[s, m.numpy(), j.numpy()] = True
        np.testing.assert_array_equal(counts.numpy(), out[s].sum(1))
    return out


@pytest.mark.parametrize("q", [0.02, 0.3, 0.9])
def test_each_row_is_included_with_probability_q_independently(q: float) -> None:
    M, N, steps = 64, 40, 200
    masks = _masks(torch.ones(M, N, dtype=torch.bool), q, steps)
    freq = masks.mean(axis=(0, 1))  # per row: 64 x 200 Bernoulli(q) draws
    se = (q * (1 - q) / (M * steps)) ** 0.5
    assert np.all(np.abs(freq - q) < 5 * se), (freq.min(), freq.max())
    # batch sizes are Binomial(N, q)
    sizes = masks.sum(2).ravel()
    assert abs(sizes.mean() - N * q) < 5 * (N * q * (1 - q) / sizes.size) ** 0.5
    assert abs(sizes.var() / (N * q * (1 - q)) - 1) < 0.1
    # neighbouring rows are independent (geometric gaps, not a sliding window)
    a, b = masks[..., :-1].ravel(), masks[..., 1:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02
    # and the counts of rows 0..N/2 vs N/2..N are uncorrelated across steps
    r, _ = stats.pearsonr(masks[..., : N // 2].sum(2).ravel(), masks[..., N // 2:].sum(2).ravel())
    assert abs(r) < 0.05


def test_only_valid_rows_and_same_numbers_for_the_same_generator() -> None:
    g = torch.Generator().manual_seed(3)
    valid = torch.rand(32, 50, generator=g) < 0.5
    valid[0] = False  # a model with no data: empty batches
    masks = _masks(valid, 0.4, 50, seed=1)
    assert not masks[:, ~valid.numpy()].any()
    assert not masks[:, 0].any()
    share = masks.sum(0)[valid.numpy()] / 50
    assert abs(share.mean() - 0.4) < 0.03
    np.testing.assert_array_equal(masks, _masks(valid, 0.4, 50, seed=1))
    assert not np.array_equal(masks, _masks(valid, 0.4, 50, seed=2))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(M=st.integers(1, 6), N=st.integers(1, 300), q=st.floats(0.001, 1.0), seed=st.integers(0, 10**6))
def test_rows_are_sorted_distinct_and_in_range(M: int, N: int, q: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    valid = torch.rand(M, N, generator=gen) < 0.7
    table, n_valid = valid_row_table(valid)
    m, j, counts = poisson_rows(table, n_valid, q, gen)
    assert torch.all(valid[m, j])
    assert torch.all(m[1:] >= m[:-1])
    same = m[1:] == m[:-1]
    assert torch.all(j[1:][same] > j[:-1][same])  # increasing, hence distinct, within a model
    assert torch.equal(torch.bincount(m, minlength=M), counts)
    if q == 1.0:
        assert torch.equal(counts, n_valid)


def test_rate_one_takes_every_valid_row() -> None:
    """q = 1 (a batch size at least the data set's, e.g. a small reference subset) is every row, every step."""
    valid = torch.tensor([[True, False, True, True], [False, False, False, False], [True] * 4])
    table, n_valid = valid_row_table(valid)
    m, j, counts = poisson_rows(table, n_valid, 1.0, torch.Generator().manual_seed(0))
    assert counts.tolist() == [3, 0, 4]
    assert list(zip(m.tolist(), j.tolist())) == [(0, 0), (0, 2), (0, 3), (2, 0), (2, 1), (2, 2), (2, 3)]
    m, j, counts = poisson_rows(None, torch.tensor([2, 2]), 1.0, torch.Generator())
    assert counts.tolist() == [2, 2] and j.tolist() == [0, 1, 0, 1]


def test_bad_rate_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        poisson_rows(None, torch.tensor([5]), 0.0, torch.Generator())


@settings(max_examples=30, deadline=None, derandomize=True)
@given(M=st.integers(1, 6), N=st.integers(1, 200), q=st.floats(0.001, 1.0), seed=st.integers(0, 10**6))
def test_padded_batches_are_the_pairs_left_aligned(M: int, N: int, q: float, seed: int) -> None:
    """The trainer's padded form: each model's rows left-aligned in order, padding row 0 marked not taken."""
    valid = torch.rand(M, N, generator=torch.Generator().manual_seed(seed)) < 0.6
    table, n_valid = valid_row_table(valid)
    idx, take, counts = poisson_batches(table, n_valid, q, torch.Generator().manual_seed(seed))
    m, j, counts2 = poisson_rows(table, n_valid, q, torch.Generator().manual_seed(seed))
    assert torch.equal(counts, counts2)
    assert idx.shape == take.shape == (M, int(counts.max()))
    assert torch.equal(take, torch.arange(idx.shape[1]).unsqueeze(0) < counts.unsqueeze(1))  # a prefix per model
    assert torch.all(idx[~take] == 0)
    assert torch.equal(idx[take], j) and torch.equal(take.nonzero()[:, 0], m)
