"""The one-run stage's work besides its training runs, timed for a first plan (``audits.one_run_work``): the
audit's own code on synthetic scores — the bounds against the claim's own trade-off curves (for a DP-SGD claim,
privacy-loss distributions that a fresh stage process computes anew) and the detectable ε."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.audits import one_run
from privaudit.audits.protocol import AuditRequest
from privaudit.claims.claim import PrivacyClaim
from privaudit.claims.mechanisms import parse_mechanism
from privaudit.defenders.specs import validate_defender_spec
from privaudit.audits.one_run_work import time_one_run_work

SG = {"kind": "subsampled_gaussian", "noise_multiplier": 4.65, "sample_rate": 0.0713, "steps": 280}


def _request(mechanism: dict | None) -> AuditRequest:
    claim = PrivacyClaim(1.0, 1e-5, "add_remove", mechanism=None if mechanism is None else parse_mechanism(mechanism))
    spec = validate_defender_spec({"name": "d", "kind": "logistic_regression"})
    return AuditRequest(spec=spec, claim=claim, level=0.01, default_delta=1e-5, seed=0)


def test_the_work_is_the_audits_own_bounds_against_the_claims_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    """``work_besides_fits`` calls the audit's bound with the family, δ and level ``run`` uses, on ``canaries``
    scores, and the detectable ε with the claim."""
    seen: dict[str, object] = {}
    real_bounds, real_detect = one_run.bounds_from_losses, one_run.detectable_one_run

    def bounds(losses, included, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(kw, m=len(losses), inc=set(np.unique(included)))
        return real_bounds(losses, included, **kw)

    def detect(claim, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(claim=claim, detect=kw)
        return real_detect(claim, **kw)

    monkeypatch.setattr(one_run, "bounds_from_losses", bounds)
    monkeypatch.setattr(one_run, "detectable_one_run", detect)
    request = _request(SG)
    one_run.work_besides_fits(request, 120, np.random.default_rng(0))
    assert seen["m"] == 120 and seen["inc"] == {0, 1} and seen["method"] == "fdp"
    assert seen["family"] == one_run._family(request) and seen["family"].name == "subsampled_gaussian"
    assert seen["level"] == request.level and seen["delta"] == max(request.delta(one_run.Neighbourhood.ADD_REMOVE),
                                                                   one_run.PURE_DELTA)
    assert seen["claim"] == request.claim_for(one_run.Neighbourhood.ADD_REMOVE) and seen["detect"]["canaries"] == 120


def test_a_dp_sgd_claims_curve_is_what_costs_and_the_probe_measures_it() -> None:
    """With cold privacy-loss-distribution caches the subsampled-Gaussian claim costs more than the (ε, δ) point
    alone; the probe reports seconds and what it timed, and refuses a canary count the audit would refuse."""
    from privaudit.stats import tradeoff

    tradeoff._pld.cache_clear()
    tradeoff._sg_profile.cache_clear()
    t_sg = time_one_run_work([_request(SG)], 160)
    t_point = time_one_run_work([_request(None)], 160)
    assert t_sg.seconds > t_point.seconds > 0
    assert t_sg.timed_by == "bounds and detectable ε of 1 defender on 160 synthetic canary scores"
    with pytest.raises(ValueError, match=r"canaries >= 10 \(one_run.canaries\), got 5"):
        time_one_run_work([_request(None)], 5)
