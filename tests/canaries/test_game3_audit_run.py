"""The Game-3 audit of one defender (privaudit.audits.game3.run): statistics in, Game-3 interval out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privaudit.audits import game3
from privaudit.defenders.info_file import read_defender_info
from tests.info_files import write_info
from privaudit.audits.game3 import load_game3_stats
from privaudit.audits.protocol import AuditInputs, AuditRequest, settings_from
from privaudit.config import Game3Params
from privaudit.defenders.specs import validate_defender_spec
from privaudit.validation import ValidationFailed

TAUS = np.linspace(0.5, 0.99, 4)


def _write(tmp: Path, n_classes: int, leak: bool, n: int = 200, claim: float | None = 1.0) -> None:
    rng = np.random.default_rng(0)
    true = rng.integers(0, n_classes, n)
    if n_classes == 2:
        pair = np.tile([0, 1], (n, 1))
    else:
        pair = np.stack([(true + 1) % n_classes, (true + 2) % n_classes], 1)
    bit = rng.integers(0, 2, n)
    trained = pair[np.arange(n), bit]
    guess = trained if leak else pair[np.arange(n), rng.integers(0, 2, n)]
    proba = np.full((n, n_classes), 0.01 / max(1, n_classes - 1))
    proba[np.arange(n), guess] = 0.99
    (tmp / "can" / "d").mkdir(parents=True)
    np.savez(tmp / "can" / "d" / "game3.npz", canary_index=np.arange(n), true_label=true, label_pair=pair,
             bit=bit, proba=proba)
    write_info(tmp / "def", "d", claimed_epsilon=claim, claimed_delta=None if claim is None else 1e-5,
               claimed_neighbourhood=None if claim is None else "add_remove")


def _run(tmp: Path) -> dict:
    request = AuditRequest(spec=validate_defender_spec({"name": "d", "kind": "logistic_regression"}),
                           claim=read_defender_info(tmp / "def", "d").claim, level=0.01, default_delta=1e-5, seed=0)
    settings = settings_from(game3.SETTINGS, Game3Params(tau_min=0.5, tau_max=0.99, tau_steps=len(TAUS), tau_selection="bonferroni"))
    bound = game3.run(request, AuditInputs(canaries_dir=tmp / "can"), settings)
    assert bound.epsilon == bound.block()["eps_low"] and bound.neighbourhood == "replace_label"
    return bound.block()


def test_a_model_that_remembers_every_canary_label_gets_a_large_lower_bound(tmp_path: Path) -> None:
    _write(tmp_path, 10, leak=True)
    r = _run(tmp_path)
    assert r["eps_low"] > 2.0 and r["level"] == 0.01 and r["neighbourhood"] == "replace_label"
    # an add/remove claim (1, 1e-5) implies (2, (1 + e) 1e-5) for a label change (group privacy)
    assert r["delta"] == pytest.approx((1 + np.e) * 1e-5)
    assert r["acgr"] is not None


def test_a_model_that_guesses_is_bounded_near_zero_and_two_classes_have_no_acgr(tmp_path: Path) -> None:
    _write(tmp_path, 2, leak=False, claim=None)
    r = _run(tmp_path)
    assert r["eps_low"] < 0.5 and r["acgr"] is None and r["delta"] == 0.0


def test_missing_or_corrupt_statistics_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run the canaries stage"):
        load_game3_stats(tmp_path / "nope.npz")
    _write(tmp_path, 10, leak=True)
    z = dict(np.load(tmp_path / "can" / "d" / "game3.npz"))
    z["proba"][0, 0] = np.nan
    np.savez(tmp_path / "can" / "d" / "game3.npz", **z)
    with pytest.raises(ValidationFailed):
        _run(tmp_path)
