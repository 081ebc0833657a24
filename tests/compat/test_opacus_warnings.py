"""The two opacus/torch warnings every DP-SGD run printed (issue 28) are filtered, precisely."""

from __future__ import annotations

import warnings

import numpy as np

from privaudit.compat.opacus_warnings import opacus_noise_filtered
from privaudit.defenders.dp_sgd import DpSgdDefender, accountant_epsilon
from privaudit.defenders.registry import validate_defender_spec

NOISE = ("Optimal order is the largest alpha", "Full backward hook is firing")


def _messages(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record]


def _warn(message: str, module: str) -> None:
    warnings.warn_explicit(message, UserWarning, filename=f"{module.replace('.', '/')}.py", lineno=1, module=module)


def test_only_the_two_messages_are_ignored_and_rdp_only_under_prv() -> None:
    rdp = "Optimal order is the largest alpha. Please consider expanding the range of alphas"
    hook = "Full backward hook is firing when gradients are computed with respect to module outputs since no inputs"
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with opacus_noise_filtered("prv"):
            _warn(rdp, "opacus.accountants.analysis.rdp")
            _warn(hook, "torch.utils.hooks")
            _warn("something else", "opacus.accountants.analysis.rdp")
            _warn(rdp, "some.other.module")  # the same text from elsewhere is not PRV's domain sizing
        with opacus_noise_filtered("rdp"):  # the RDP accountant's own grid warning concerns its ε: kept
            _warn(rdp, "opacus.accountants.analysis.rdp")
        _warn(hook, "torch.utils.hooks")  # outside the block: shown
    assert _messages(record) == ["something else", rdp, rdp, hook]


def test_a_dp_sgd_fit_and_its_prv_accounting_print_no_noise_warnings() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5)).astype(np.float32)
    y = rng.integers(3, size=120)
    # an ε no other test uses: the σ calibration is cached per process
    spec = validate_defender_spec({"name": "d", "kind": "dp_sgd", "epsilon": 0.7731, "epochs": 2, "batch_size": 12})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = DpSgdDefender(spec, n_classes=3).fit(X, y, seed=1)
        claimed = model.claimed_epsilon()
    assert claimed is not None and 0 < claimed <= 0.7731 + 1e-6
    assert not [m for m in _messages(record) if m.startswith(NOISE)], _messages(record)


def test_the_rdp_accountants_own_warning_still_shows() -> None:
    """σ = 20 at q = 0.01: tiny ε, whose best RDP order lies beyond opacus's grid."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        eps = accountant_epsilon(20.0, 0.01, 10, 1e-5, "rdp")
    assert eps > 0
    assert any(m.startswith("Optimal order is the largest alpha") for m in _messages(record))


def test_prv_accounting_at_the_same_point_is_quiet() -> None:
    """Unfiltered, opacus's PRV accountant warns twice here (its domain sizing runs RDP)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        accountant_epsilon(20.0, 0.01, 10, 1e-5, "prv")
    assert not [m for m in _messages(record) if m.startswith(NOISE)], _messages(record)
