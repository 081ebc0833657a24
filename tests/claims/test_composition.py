"""Composition of claims (issue 45): declared mechanisms against dp_accounting's own ``PLDAccountant`` composition
of the same ``DpEvent``s (<= 1 % relative epsilon); bare (epsilon, delta) claims against Kairouz, Oh & Viswanath
2015 Theorem 3.3, computed here independently of the module; properties of the optimal composition."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.claims.composition import ComposedClaim, compose
from privaudit.claims.mechanisms import (GaussianMechanism, GdpMechanism, LaplaceMechanism,
                                          RandomizedResponseMechanism, SubsampledGaussianMechanism)
from privaudit.claims.claim import PrivacyClaim

GAUSS = GaussianMechanism(kind="gaussian", noise_multiplier=3.0)
SG = SubsampledGaussianMechanism(kind="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, steps=500)
LAP = LaplaceMechanism(kind="laplace", scale=2.0)
GDP = GdpMechanism(kind="gdp", mu=0.5)
RR = RandomizedResponseMechanism(kind="randomized_response", epsilon=1.0, classes=10)


def _claim(mechanism, neighbourhood: str = "add_remove") -> PrivacyClaim:
    return PrivacyClaim(mechanism.epsilon_at(1e-5) if not isinstance(mechanism, (LaplaceMechanism,
                                                                                  RandomizedResponseMechanism))
                        else mechanism.epsilon_at(0.0), 1e-5, neighbourhood, mechanism)


def _accountant_epsilon(mechanisms, delta: float, relation: str) -> float:
    from dp_accounting import dp_event, privacy_accountant
    from dp_accounting.pld import pld_privacy_accountant

    rel = privacy_accountant.NeighboringRelation[relation]
    acc = pld_privacy_accountant.PLDAccountant(rel)
    acc.compose(dp_event.ComposedDpEvent([m.dp_event() for m in mechanisms]))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("mechanisms", [
    [GAUSS], [SG], [LAP], [GDP], [GAUSS, GAUSS], [SG, LAP, GDP], [GAUSS, SG, LAP, GDP, SG],
], ids=["gaussian", "subsampled_gaussian", "laplace", "gdp", "2x gaussian", "sg+laplace+gdp", "five"])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_declared_mechanisms_compose_as_dp_accounting_does(mechanisms, delta: float) -> None:
    ours = compose([_claim(m) for m in mechanisms]).epsilon_at(delta)
    theirs = _accountant_epsilon(mechanisms, delta, "ADD_OR_REMOVE_ONE")
    assert ours == pytest.approx(theirs, rel=0.01), (ours, theirs)


def test_randomized_response_composes_as_dp_accounting_does_for_replace_one() -> None:
    ours = compose([_claim(RR, "replace_one")] * 3).epsilon_at(1e-6)
    theirs = _accountant_epsilon([RR] * 3, 1e-6, "REPLACE_ONE")
    assert ours == pytest.approx(theirs, rel=0.01), (ours, theirs)
    assert RR.dp_event().noise_parameter == pytest.approx(10 / (math.e + 9))
    assert compose([_claim(RR, "replace_one")]).epsilon_at(0.0) == pytest.approx(1.0, rel=1e-3)


def _kov(k: int, eps: float, delta: float) -> list[tuple[float, float]]:
    """KOV 2015 Theorem 3.3: ((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i)) for i = 0 .. k/2, the delta written
    1 - (1 - delta)^k + (1 - delta)^k delta_i (the same number, without the cancellation of 1 - (1 - delta_i))."""
    out = []
    keep = (1.0 - delta) ** k
    for i in range(k // 2 + 1):
        delta_i = sum(math.comb(k, l) * (math.exp((k - l) * eps) - math.exp((k - 2 * i + l) * eps))
                      for l in range(i)) / (1.0 + math.exp(eps)) ** k
        out.append(((k - 2 * i) * eps, -math.expm1(k * math.log1p(-delta)) + keep * delta_i))
    return out


@pytest.mark.parametrize("k,eps,delta", [(10, 0.1, 1e-6), (7, 0.5, 1e-5), (30, 0.05, 0.0), (2, 1.0, 1e-3)])
def test_k_equal_bare_claims_follow_kov_theorem_3_3(k: int, eps: float, delta: float) -> None:
    c = compose([PrivacyClaim(eps, delta, "add_remove")] * k)
    assert c.method == "kov"
    for eps_i, delta_i in _kov(k, eps, delta):
        assert c.delta_at(eps_i) == pytest.approx(delta_i, rel=1e-9, abs=1e-15)
        if delta_i > 0 and eps_i > 0:
            assert c.epsilon_at(delta_i) == pytest.approx(eps_i, rel=1e-9)


def test_kov_golden_numbers() -> None:
    """k = 10, eps = 0.1, delta = 1e-6: the numbers of Theorem 3.3 (this test's formula) at i = 0, 1, 2."""
    c = compose([PrivacyClaim(0.1, 1e-6, "add_remove")] * 10)
    assert c.delta_at(1.0) == pytest.approx(9.999955e-06, rel=1e-6)
    assert c.delta_at(0.8) == pytest.approx(2.98230930e-4, rel=1e-6)
    assert c.delta_at(0.6) == pytest.approx(3.14223621e-3, rel=1e-6)
    assert c.epsilon_at(1e-5) < 1.0 < c.basic()[0] + 1e-12  # better than basic composition's 1.0 at 1e-5


def test_heterogeneous_bare_claims_match_brute_force_enumeration() -> None:
    """Murtagh & Vadhan 2016 Thm. 1.5 by enumerating every subset S of the claims."""
    pairs = [(0.3, 1e-6), (1.0, 0.0), (0.05, 1e-5), (0.3, 0.0), (2.0, 1e-7)]
    c = compose([PrivacyClaim(e, d, "replace_one") for e, d in pairs])
    keep = math.prod(1.0 - d for _, d in pairs)
    den = math.prod(1.0 + math.exp(e) for e, _ in pairs)
    for target in (0.0, 0.4, 1.3, 2.5, 3.6):
        total = 0.0
        for mask in range(1 << len(pairs)):
            ins = sum(e for j, (e, _) in enumerate(pairs) if mask >> j & 1)
            outs = sum(e for j, (e, _) in enumerate(pairs) if not mask >> j & 1)
            total += max(0.0, math.exp(ins) - math.exp(target) * math.exp(outs))
        assert c.delta_at(target) == pytest.approx(1.0 - keep + keep * total / den, rel=1e-9, abs=1e-15)


def test_the_pld_path_of_bare_claims_is_pessimistic_and_close() -> None:
    claims = [PrivacyClaim(0.2, 1e-6, "add_remove")] * 8 + [PrivacyClaim(0.7, 0.0, "add_remove")]
    exact = compose(claims)
    assert exact.method == "kov"
    via_pld = compose(claims + [PrivacyClaim(1e-9, 0.0, "add_remove", GdpMechanism(kind="gdp", mu=1e-6))])
    assert via_pld.method == "pld"
    for delta in (1e-5, 1e-3):
        e, p = exact.epsilon_at(delta), via_pld.epsilon_at(delta)
        assert e <= p * (1 + 1e-9) and p == pytest.approx(e, rel=0.01), (e, p)


def test_a_mixture_composes_each_bare_claim_through_its_dominating_pair() -> None:
    bare = PrivacyClaim(0.5, 1e-6, "add_remove")
    mixed = compose([_claim(SG), bare])
    assert mixed.method == "pld"
    alone_sg, alone_bare = compose([_claim(SG)]).epsilon_at(1e-5), compose([bare]).epsilon_at(1e-5)
    both = mixed.epsilon_at(1e-5)
    assert max(alone_sg, alone_bare) < both < alone_sg + alone_bare + 1e-9


def test_a_claim_without_dp_composes_to_infinity() -> None:
    c = compose([PrivacyClaim(1.0, 1e-6, "add_remove"), PrivacyClaim(math.inf, 0.0, "add_remove")])
    assert c.method == "none" and c.epsilon_at(1e-5) == math.inf and c.delta_at(10.0) == 1.0


def test_claims_of_different_neighbourhoods_are_refused_naming_both() -> None:
    with pytest.raises(ValueError) as err:
        compose([PrivacyClaim(1.0, 0.0, "add_remove"), PrivacyClaim(1.0, 0.0, "replace_label")])
    assert "'add_remove'" in str(err.value) and "'replace_label'" in str(err.value)
    with pytest.raises(ValueError, match="at least one claim"):
        compose([])


_eps = st.floats(min_value=0.01, max_value=3.0)
_delta = st.sampled_from([0.0, 1e-7, 1e-6, 1e-5, 1e-4])
_pairs = st.lists(st.tuples(_eps, _delta), min_size=1, max_size=6)


def _bare(pairs) -> ComposedClaim:
    return compose([PrivacyClaim(e, d, "add_remove") for e, d in pairs])


@settings(max_examples=60, deadline=None)
@given(_eps, _delta, st.sampled_from([1e-6, 1e-5, 1e-3, 0.05]))
def test_one_claim_composes_to_its_own_profile(eps: float, delta: float, target: float) -> None:
    c = _bare([(eps, delta)])
    assert c.epsilon_at(delta) == pytest.approx(eps, rel=1e-9)
    # the (eps, delta) pair's profile: delta + (1 - delta)(e^eps - e^t)_+ / (1 + e^eps)
    for t in (0.0, eps / 2, eps, 2 * eps):
        assert c.delta_at(t) == pytest.approx(delta + (1 - delta) * max(0.0, math.exp(eps) - math.exp(t))
                                              / (1 + math.exp(eps)), rel=1e-9, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(_pairs, st.randoms(use_true_random=False))
def test_composition_is_commutative(pairs, rnd) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    for delta in (1e-6, 1e-3):
        assert _bare(pairs).epsilon_at(delta) == pytest.approx(_bare(shuffled).epsilon_at(delta), rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(_pairs, st.integers(min_value=0, max_value=5), st.floats(min_value=0.001, max_value=1.0))
def test_composition_is_monotone_in_every_epsilon(pairs, which: int, bump: float) -> None:
    j = which % len(pairs)
    bigger = list(pairs)
    bigger[j] = (pairs[j][0] + bump, pairs[j][1])
    for delta in (1e-6, 1e-3, 0.05):
        assert _bare(bigger).epsilon_at(delta) >= _bare(pairs).epsilon_at(delta) - 1e-12


@settings(max_examples=60, deadline=None)
@given(_pairs)
def test_never_below_the_largest_claim_nor_above_basic_composition(pairs) -> None:
    c = _bare(pairs)
    for eps, delta in pairs:  # composing more releases never lowers a single release's epsilon at its delta
        assert c.epsilon_at(delta) >= eps * (1 - 1e-9)
    sum_eps, sum_delta = c.basic()
    assert c.epsilon_at(sum_delta) <= sum_eps * (1 + 1e-9) + 1e-12
    assert c.delta_at(sum_eps) <= sum_delta * (1 + 1e-9) + 1e-15


def test_mechanisms_are_events_taken_whole() -> None:
    """Consumers call methods, never unpack (sigma, q, T): a fit that ran another number of steps is a new event;
    every kind gives its dp_accounting event and its PLD (cached: the model is immutable)."""
    from dp_accounting import dp_event

    longer = SG.with_steps(2 * SG.steps)
    assert longer.steps == 2 * SG.steps and SG.steps == 500 and longer.epsilon_at(1e-5) > SG.epsilon_at(1e-5)
    with pytest.raises(ValueError, match="steps"):
        SG.with_steps(0)
    assert isinstance(SG.dp_event(), dp_event.SelfComposedDpEvent) and SG.dp_event().count == 500
    assert GDP.dp_event() == dp_event.GaussianDpEvent(2.0)
    for m in (GAUSS, SG, LAP, GDP, RR):
        assert m.pld() is m.pld()
        assert m.pld(1e-3).get_epsilon_for_delta(1e-5) >= m.pld(1e-4).get_epsilon_for_delta(1e-5) * (1 - 1e-3)
