"""The behaviour contract of every registered audit (issue 36), run over the registry the way dp_accounting
runs one test suite over every accountant: whatever the audit, ``run(request, inputs, settings)``

1. returns its bound at the level it was asked for (``bound.level`` and the block's ``level``);
2. keeps an honest mechanism under its claim (a lower bound above the claim of a mechanism that meets it is
   a false alarm; the inputs here are fixed draws, so this is one draw of an event of probability ≤ level);
3. never certifies more with more confidence: the bound at a smaller level is no larger.

A newly registered audit fails :func:`test_every_audit_in_metrics_audit_json_has_an_honest_case` until it has a
case here.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privaudit.audits.protocol import AuditBound, AuditInputs, AuditRequest, DefenderData, settings_from
from privaudit.config import parse_params
from privaudit.defenders.specs import validate_defender_spec
from privaudit.claims.claim import PrivacyClaim
from privaudit.claims.registry import audit_line, block_audits
from tests.torch_threads import _one_torch_thread  # noqa: F401  (autouse: one torch thread, as the stages train)

CLAIM = PrivacyClaim(2.0, 1e-5, "add_remove")
DP_SGD = {"name": "d", "kind": "dp_sgd", "epsilon": 2.0, "delta": 1e-5, "epochs": 2, "batch_size": 32}


def _settings(name: str) -> Any:
    """The audit's own settings type, read off the default params block its registry line names."""
    block = getattr(parse_params({"defenders": [{"name": "x", "kind": "logistic_regression"}]}), audit_line(name).settings)
    return settings_from(importlib.import_module(audit_line(name).module).SETTINGS, block)


def _data() -> DefenderData:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 240)
    X = (rng.normal(size=(240, 6)) + y[:, None] * 0.5).astype(np.float32)
    return DefenderData(X, y.astype(np.int64), 3)


def _trainer_case(tmp: Path) -> tuple[dict, AuditInputs]:
    return DP_SGD, AuditInputs(defender_data=_data())


def _blackbox_case(tmp: Path) -> tuple[dict, AuditInputs]:
    # a Gaussian mechanism of shift 0.4 in units of its noise: 0.4-GDP, inside (2, 1e-5)-DP (0.45-GDP is at its edge)
    rng = np.random.default_rng(1)
    n = 1000
    (tmp / "d").mkdir(parents=True)
    np.savez(tmp / "d" / "blackbox.npz", score=np.r_[rng.normal(0.4, 1, n), rng.normal(0, 1, n)],
             included=np.r_[np.ones(n, np.int8), np.zeros(n, np.int8)])
    (tmp / "d" / "meta.json").write_text(json.dumps({"blackbox": {"n_train": 240, "canary": "c"}}))
    return {"name": "d", "kind": "logistic_regression"}, AuditInputs(canaries_dir=tmp)


def _lidp_case(tmp: Path) -> tuple[dict, AuditInputs]:
    # each canary a Gaussian mechanism of shift 0.4 (members' losses lower by 0.4 noise units): 0.4-GDP per
    # canary, inside (2, 1e-5)-DP
    rng = np.random.default_rng(2)
    (tmp / "d").mkdir(parents=True)
    np.savez(tmp / "d" / "lidp.npz", loss_in=np.clip(rng.normal(4.6, 1, (512, 16)), 0, None),
             loss_null=np.clip(rng.normal(5.0, 1, (512, 16)), 0, None))
    return {"name": "d", "kind": "logistic_regression"}, AuditInputs(canaries_dir=tmp)


def _game3_case(tmp: Path) -> tuple[dict, AuditInputs]:
    # the model names the label it was trained with with probability e^2 / (1 + e^2): randomized response
    # with ε = 2 per label, inside the ε = 4 that the (2, 1e-5) add/remove claim implies for a label change
    rng = np.random.default_rng(3)
    n, c = 600, 10
    true = rng.integers(0, c, n)
    pair = np.stack([(true + 1) % c, (true + 2) % c], 1)
    bit = rng.integers(0, 2, n)
    proba = np.full((n, c), 0.01 / (c - 1))
    truthful = rng.random(n) < np.exp(2.0) / (1 + np.exp(2.0))
    proba[np.arange(n), pair[np.arange(n), np.where(truthful, bit, 1 - bit)]] = 0.99
    (tmp / "d").mkdir(parents=True)
    np.savez(tmp / "d" / "game3.npz", canary_index=np.arange(n), true_label=true, label_pair=pair, bit=bit,
             proba=proba)
    return {"name": "d", "kind": "logistic_regression"}, AuditInputs(canaries_dir=tmp)


HONEST: dict[str, Callable[[Path], tuple[dict, AuditInputs]]] = {
    "whitebox": _trainer_case, "one_run": _trainer_case, "blackbox": _blackbox_case, "lidp": _lidp_case,
    "game3": _game3_case}


def _run(name: str, tmp: Path, level: float) -> AuditBound:

    spec, inputs = HONEST[name](tmp)
    request = AuditRequest(spec=validate_defender_spec(spec), claim=CLAIM, level=level, default_delta=1e-5, seed=0)
    return importlib.import_module(audit_line(name).module).run(request, inputs, _settings(name))


def test_every_audit_in_metrics_audit_json_has_an_honest_case() -> None:
    assert set(HONEST) == {a.name for a in block_audits()}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_the_bound_is_at_the_requested_level_and_under_an_honest_claim(name: str, tmp_path: Path) -> None:
    strict, loose = _run(name, tmp_path / "strict", 0.001), _run(name, tmp_path / "loose", 0.05)
    for bound, level in ((strict, 0.001), (loose, 0.05)):
        assert bound.level == level and bound.block()["level"] == level
        assert 0.0 <= bound.epsilon <= CLAIM.epsilon, (name, level, bound.epsilon)
    assert strict.epsilon <= loose.epsilon + 1e-12, (name, strict.epsilon, loose.epsilon)
