"""Issue 13: the exact (Clopper-Pearson) 1st-order XBern interval and its exact coverage at small n."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats as sps

from privaudit.stats import clopper_pearson, lidp_epsilon_lower_bound, xbern_interval, xbern_interval_from_counts


def _exact_worst_miss(n: int, level: float, method: str, k: int = 1) -> tuple[float, float]:
    """sup_p P_p(lower > p) and sup_p P_p(upper < p) for K = k all-or-nothing canaries (the trial
    count is k * Binomial(n, p)), computed exactly by enumerating the binomial.  The sup of
    P(lower > p) is approached just below one of the n + 1 lower ends (and symmetrically)."""
    succ = np.arange(n + 1)
    counts = np.zeros((n + 1, n))
    for j in succ:
        counts[j, :j] = k
    lo, up = xbern_interval_from_counts(counts, k, level=level, order=1, method=method)  # type: ignore[arg-type]
    eps = 1e-12
    p_lo = np.clip(np.r_[lo - eps, np.linspace(0, 1, 2001)], 0, 1)
    p_up = np.clip(np.r_[up + eps, np.linspace(0, 1, 2001)], 0, 1)
    pmf_lo = sps.binom.pmf(succ[None, :], n, p_lo[:, None])
    pmf_up = sps.binom.pmf(succ[None, :], n, p_up[:, None])
    miss_lo = (pmf_lo * (lo[None, :] > p_lo[:, None])).sum(axis=1).max()
    miss_up = (pmf_up * (up[None, :] < p_up[:, None])).sum(axis=1).max()
    return float(miss_lo), float(miss_up)


@pytest.mark.parametrize("n", [16, 5, 40])
def test_clopper_pearson_exact_one_sided_coverage_at_small_n(n: int) -> None:
    """The default LiDP audit certifies on 16 trials at level/2 = 0.025 per side."""
    level = 0.025
    for k in (1, 4):  # K = 1 and K = 4 with all-or-nothing trials (where CP is exact too)
        miss_lo, miss_up = _exact_worst_miss(n, level, "clopper_pearson", k)
        assert miss_lo <= level + 1e-9 and miss_up <= level + 1e-9


def test_wilson_first_order_is_not_exact_at_n16() -> None:
    """Why issue 13 switches the small-n audit to Clopper-Pearson: Wilson misses far above 0.025."""
    miss_lo, miss_up = _exact_worst_miss(16, 0.025, "wilson")
    assert miss_lo > 0.04 and miss_up > 0.04


@given(k=st.integers(0, 60), n=st.integers(1, 60), beta=st.sampled_from([0.01, 0.025, 0.05, 0.3]))
@settings(max_examples=60, deadline=None)
def test_k1_equals_binomial_clopper_pearson(k: int, n: int, beta: float) -> None:
    k = min(k, n)
    x = np.zeros((n, 1))
    x[:k] = 1
    ref = clopper_pearson(k, n, level=beta)  # one-sided at beta per end
    for order in (1, 2, 4):  # K = 1: every order is the Bernoulli interval
        lo, up = xbern_interval(x, level=beta, order=order, method="clopper_pearson")
        assert (lo, up) == (pytest.approx(ref[0], abs=1e-10), pytest.approx(ref[1], abs=1e-10))


def test_k_gt_1_uses_trial_means_and_needs_order_1() -> None:
    counts = np.array([3, 4, 0, 2, 4, 1])
    lo, up = xbern_interval_from_counts(counts, 4, level=0.05, order=1, method="clopper_pearson")
    s = counts.sum() / 4
    assert lo == pytest.approx(sps.beta.ppf(0.05, s, 6 - s + 1))
    assert up == pytest.approx(sps.beta.ppf(0.95, s + 1, 6 - s))
    # all-or-nothing trials: the same as the K = 1 interval on one outcome per trial
    aon = np.array([4, 0, 4, 4, 0])
    assert xbern_interval_from_counts(aon, 4, level=0.05, order=1, method="clopper_pearson") == pytest.approx(
        xbern_interval_from_counts(aon // 4, 1, level=0.05, order=1, method="clopper_pearson"))
    with pytest.raises(ValueError, match="first-order"):
        xbern_interval_from_counts(counts, 4, level=0.05, order=2, method="clopper_pearson")
    with pytest.raises(ValueError, match="method"):
        xbern_interval_from_counts(counts, 4, level=0.05, order=1, method="exact")  # type: ignore[arg-type]
    lo2, up2 = xbern_interval_from_counts(np.stack([counts, counts]), 4, level=0.05, order=1,
                                          method="clopper_pearson")
    assert lo2.shape == (2,) and lo2[1] == pytest.approx(lo)


@given(x=hnp.arrays(np.int8, st.tuples(st.integers(1, 40), st.integers(1, 12)), elements=st.integers(0, 1)),
       level=st.sampled_from([0.01, 0.05, 0.2]))
@settings(max_examples=60, deadline=None)
def test_clopper_pearson_lower_le_mean_le_upper(x: np.ndarray, level: float) -> None:
    lo, up = xbern_interval(x, level=level, order=1, method="clopper_pearson")
    mean = float(x.mean())
    assert 0.0 <= lo <= mean + 1e-12 and mean - 1e-12 <= up <= 1.0


def test_lidp_bound_accepts_clopper_pearson() -> None:
    x = np.ones((200, 1))
    x[:40] = 0
    y = np.zeros((200, 1))
    y[:20] = 1
    lo, _ = clopper_pearson(160, 200, level=0.025)
    _, up = clopper_pearson(20, 200, level=0.025)
    assert lidp_epsilon_lower_bound(x, y, 1e-5, level=0.05, order=1, method="clopper_pearson") == pytest.approx(
        np.log((lo - 1e-5) / up))
