"""PATE with confident GNMax: accounting, calibration, query slice, accuracy vs epsilon."""

from __future__ import annotations

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import get_privacy_spent

from privaudit.defenders.pate import calibrate_sigma2, gnmax_epsilon, rdp_linear_to_dp
from privaudit.defenders.registry import make_defender, validate_defender_spec


def test_rdp_conversion_matches_opacus_and_classical_bound() -> None:
    rho, delta = 0.37, 1e-5
    orders = np.linspace(1.01, 300, 30000)
    ref, _ = get_privacy_spent(orders=list(orders), rdp=list(rho * orders), delta=delta)
    assert rdp_linear_to_dp(rho, delta) == pytest.approx(ref, rel=1e-4)
    assert rdp_linear_to_dp(rho, delta) <= rho + 2 * np.sqrt(rho * np.log(1 / delta))


def test_gnmax_epsilon_golden() -> None:
    # 100 queries, sigma1 = 80, sigma2 = 10: rho = 100 (1/12800 + 1/100) = 1.0078125
    assert gnmax_epsilon(80.0, 10.0, 100, 1e-5) == pytest.approx(rdp_linear_to_dp(1.0078125, 1e-5), rel=1e-12)
    assert gnmax_epsilon(80.0, 10.0, 0, 1e-5) == 0.0
    with pytest.raises(ValueError):
        gnmax_epsilon(0.0, 10.0, 5, 1e-5)


@pytest.mark.parametrize("eps", [0.5, 4.0, 30.0])
def test_calibration_hits_target(eps: float) -> None:
    s2 = calibrate_sigma2(eps, 1e-5, 90, 8.0)
    assert gnmax_epsilon(8 * s2, s2, 90, 1e-5) <= eps
    assert gnmax_epsilon(8 * s2 * 0.99, s2 * 0.99, 90, 1e-5) > eps


def _fit(eps: float, data, seed: int):
    spec = validate_defender_spec({"name": "p", "kind": "pate", "epsilon": eps, "teachers": 20,
                                   "query_fraction": 0.1, "teacher": {"kind": "sklearn", "estimator": "gaussian_nb"}},
                                  where="defenders[0]")
    return make_defender(spec, 10).fit(data.X, data.y, seed=seed)


def test_describe_records_query_slice_and_claim(medium) -> None:
    m = _fit(20.0, medium, 0)
    info = m.describe()
    rows = np.asarray(info["query_rows"])
    assert len(rows) == info["queries"] == 90 and len(np.unique(rows)) == 90
    assert info["n_private"] + info["queries"] == len(medium.y)
    assert 0 < info["answered"] <= 90 and info["threshold"] == 10.0
    assert info["sigma1"] == pytest.approx(8 * info["sigma2"])
    assert m.claimed_epsilon() <= 20.0 and m.claimed_epsilon() == pytest.approx(20.0, rel=1e-6)
    assert info["ensemble_accuracy"] > 0.8 and "data-independent" in info["epsilon_analysis"]


def test_accuracy_falls_as_epsilon_falls(medium) -> None:
    acc = []
    for eps in (0.5, 5.0, 50.0):
        a = [np.mean(_fit(eps, medium, s).predict_proba(medium.Xt).argmax(axis=1) == medium.yt) for s in range(3)]
        acc.append(float(np.mean(a)))
    assert acc[2] > 0.7 and acc[0] < 0.3, acc
    assert acc[0] < acc[1] + 0.03 and acc[1] < acc[2], acc


def test_nested_specs_are_validated() -> None:
    with pytest.raises(ValueError, match=r"defenders\[2\]\.teacher.*cannot be nested"):
        validate_defender_spec({"name": "p", "kind": "pate", "epsilon": 1.0, "teacher": {"kind": "pate", "epsilon": 1.0}},
                               where="defenders[2]")
    with pytest.raises(ValueError, match=r"defenders\[2\]\.student"):
        validate_defender_spec({"name": "p", "kind": "pate", "epsilon": 1.0, "student": {"kind": "nope"}},
                               where="defenders[2]")


def test_too_few_rows_is_a_clear_error(tiny) -> None:
    spec = validate_defender_spec({"name": "p", "kind": "pate", "epsilon": 1.0, "teachers": 200})
    with pytest.raises(ValueError, match="200 teachers"):
        make_defender(spec, 10).fit(tiny.X, tiny.y, seed=0)
