"""The PRV accountant's grid is sized once per ε: the size check's domain is the accountant's domain.

opacus's ``compute_safe_domain_size`` (an RDP bound over many fractional orders) took half of a long
noise schedule's accounting when it ran once for the grid-size guard and again inside the accountant.
"""

from __future__ import annotations

import warnings

import opacus.accountants.analysis.prv as analysis_prv
import opacus.accountants.prv as opacus_prv
import pytest
from opacus.accountants import PRVAccountant

from privaudit.stats.accounting import compose_epsilon, compose_epsilon_lower

SCHEDULE = [(1.2 * 0.8**i, 0.05, 20) for i in range(5)]  # a noise schedule: 5 (z, q) groups of 20 steps


@pytest.fixture()
def domain_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = analysis_prv.compute_safe_domain_size

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(analysis_prv, "compute_safe_domain_size", counting)
    monkeypatch.setattr(opacus_prv, "compute_safe_domain_size", counting)
    return calls


def _opacus(history: list[tuple[float, float, int]], delta: float, eps_error: float = 0.01) -> tuple[float, float]:
    """opacus's own (ε_low, ε_up) of ``history``."""
    acc = PRVAccountant()
    acc.history = list(history)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, _, up = acc._get_dprv(eps_error=eps_error, delta_error=delta / 1000).compute_epsilon(
            delta, delta / 1000, eps_error)
    return float(low), float(up)


@pytest.mark.parametrize("history", [SCHEDULE, [(1.0, 0.1, 100)]])
def test_the_domain_is_computed_once_and_every_bit_is_opacus(history, domain_calls: list[int]) -> None:
    low, how = compose_epsilon_lower(history, 1e-5)
    assert how == "prv lower" and domain_calls[0] == 1
    up, how = compose_epsilon(history, 1e-5, "prv")
    assert how == "accountant" and domain_calls[0] == 2
    domain_calls[0] = 0
    assert (low, up) == _opacus(history, 1e-5)  # the same floats as opacus computing its domain itself


def test_another_eps_error_sizes_the_guard_with_its_own_domain(domain_calls: list[int]) -> None:
    low, how = compose_epsilon_lower(SCHEDULE, 1e-5, eps_error=0.02)
    assert how == "prv lower" and domain_calls[0] == 2  # the guard's 0.01 grid and the accountant's 0.02 grid
    domain_calls[0] = 0
    assert low == _opacus(SCHEDULE, 1e-5, eps_error=0.02)[0]
