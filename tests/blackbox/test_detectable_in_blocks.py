"""Issue 35: every gated bound says how much it could have seen: detectable_epsilon in its block, and the report's
first screen names the smallest one, so "all bounds 0, all checks passed" never reads as a clean bill of health."""

from __future__ import annotations

import pytest

from privaudit.audits.blackbox import detectable_for
from privaudit.audits.one_run import detectable_one_run
from privaudit.claims.claim import PrivacyClaim, claim_family
from privaudit.claims.mechanisms import parse_mechanism
from privaudit.verdict.metrics_files import AuditEntry
from privaudit.report.sections import could_have_seen
from privaudit.stats.detectable import detectable_epsilon_blackbox
from privaudit.stats.tradeoff import GaussianFamily


def _claim(mechanism: dict | None, delta: float = 1e-5) -> PrivacyClaim:
    return PrivacyClaim(1.0, delta, "add_remove", parse_mechanism(mechanism) if mechanism else None)


def test_no_claim_nothing_to_detect() -> None:
    assert detectable_for(None, claim_family(None, 1e-5), n_in=320, n_out=320, tune_fraction=0.2, level=0.01,
                          delta=1e-5) == {"detectable_epsilon": None}
    assert detectable_one_run(None, canaries=100, level=0.01, delta=1e-5) == {"detectable_epsilon": None}


@pytest.mark.parametrize("mechanism", [None, {"kind": "laplace", "scale": 1.0}])
def test_more_runs_see_smaller_violations(mechanism: dict | None) -> None:
    delta = 0.0 if mechanism else 1e-5
    c = _claim(mechanism, delta)
    small, big = (detectable_for(c, claim_family(c, delta), n_in=n, n_out=n, tune_fraction=0.2, level=0.05 / 6,
                                 delta=delta)["detectable_epsilon"] for n in (64, 2000))
    assert 1.0 < big < small


def test_a_subsampled_gaussian_claim_is_sized_on_the_gaussian_curve_of_its_epsilon() -> None:
    c = _claim({"kind": "subsampled_gaussian", "noise_multiplier": 4.65, "sample_rate": 0.0712, "steps": 280})
    got = detectable_for(c, claim_family(c, 1e-5), n_in=320, n_out=320, tune_fraction=0.2, level=0.05 / 6,
                         delta=1e-5)
    want = detectable_epsilon_blackbox(GaussianFamily(1e-6), claimed_epsilon=1.0, n_in=320, n_out=320,
                                       tune_fraction=0.2, level=0.05 / 6, delta=1e-5)
    assert got["detectable_epsilon"] == pytest.approx(want) and got["detectable_curve"] == "gaussian"


def _entry(detectable: dict[str, float | None]) -> AuditEntry:
    blocks = {k: {"eps_lower_bound": 0.0, "detectable_epsilon": v} for k, v in detectable.items()}
    return AuditEntry.model_validate({"claimed_epsilon": 1.0, "claimed_delta": 1e-5, "claimed_neighbourhood":
                                      "add_remove", **blocks})


def test_the_first_screen_names_the_most_sensitive_bound() -> None:
    text = could_have_seen(_entry({"blackbox": 1.88, "one_run": 8.3, "game3": None}))
    assert text.startswith("a true ε ≥ 1.88 is caught with probability ≥ 0.8")
    assert "black-box: ε ≥ 1.88; one-run: ε ≥ 8.30; Game 3: nothing below ε 50" in text
    assert could_have_seen(_entry({"blackbox": None})) == "no bound could have caught any true ε below 50 at these sizes"
