"""Declared mechanisms (issue 33): params validation, the claim's round trip through ``info.json``, and the
black-box audit of an honest exactly-ε-DP Laplace trainer (``examples/noisy_sums_trainer.py``) end to end
through the real ``kind: python`` defender, ``audit_trainer``'s runs and ``audits.blackbox.run``.

Ground truth: the Laplace trainer is pure ε-DP (output perturbation with L1 sensitivity 1), so no honest
claim may be refuted beyond the level, declared or not; the old GDP-view gate refuted it routinely.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from privaudit.audits import blackbox as bb_audit
from privaudit.defenders.info_file import read_defender_info
from tests.info_files import write_info
from privaudit.audits.protocol import AuditInputs, AuditRequest
from privaudit.testing.blackbox_runs import BlackboxAuditConfig, audit_trainer
from privaudit.claims.mechanisms import LaplaceMechanism, parse_mechanism
from privaudit.defenders.registry import make_defender
from privaudit.defenders.specs import validate_defender_spec
from privaudit.stats.tradeoff import EpsDeltaFamily, LaplaceFamily, SubsampledGaussianFamily

TARGET = "examples/noisy_sums_trainer.py:train"


def _spec(**extra: object):
    raw = {"name": "lap", "kind": "python", "target": TARGET, "options": {"epsilon": 1.0},
           "claimed_epsilon": 1.0, "claimed_delta": 0, **extra}
    return validate_defender_spec(raw, where="defenders[0]")


def test_a_pure_claim_and_a_laplace_declaration_are_accepted() -> None:
    spec = _spec(mechanism={"kind": "laplace", "scale": 1.0})
    assert spec.claimed_delta == 0 and isinstance(spec.mechanism, LaplaceMechanism)
    assert isinstance(spec.mechanism.family(), LaplaceFamily)


@pytest.mark.parametrize("mechanism,needle", [
    ({"kind": "staircase", "scale": 1.0}, "defenders[0].mechanism"),
    ({"kind": "gaussian", "noise_multiplier": 0}, "defenders[0].mechanism.gaussian.noise_multiplier"),
    ({"kind": "subsampled_gaussian", "noise_multiplier": -1, "sample_rate": 0.1, "steps": 10},
     "defenders[0].mechanism.subsampled_gaussian.noise_multiplier"),
    ({"kind": "subsampled_gaussian", "noise_multiplier": 1, "sample_rate": 1.5, "steps": 10},
     "defenders[0].mechanism.subsampled_gaussian.sample_rate"),
    ({"kind": "subsampled_gaussian", "noise_multiplier": 1, "sample_rate": 0.0, "steps": 10},
     "defenders[0].mechanism.subsampled_gaussian.sample_rate"),
    ({"kind": "subsampled_gaussian", "noise_multiplier": 1, "sample_rate": 0.1, "steps": 0},
     "defenders[0].mechanism.subsampled_gaussian.steps"),
    ({"kind": "randomized_response", "epsilon": 1.0, "classes": 1}, "defenders[0].mechanism.randomized_response.classes"),
])
def test_bad_mechanisms_are_refused_naming_the_key(mechanism: dict, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        _spec(mechanism=mechanism)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg, msg


def test_a_mechanism_weaker_than_the_claim_is_refused_naming_both_numbers() -> None:
    with pytest.raises(ValueError) as err:  # Laplace scale 0.5 is 2-DP, the claim says 1
        _spec(mechanism={"kind": "laplace", "scale": 0.5})
    msg = str(err.value)
    assert "defenders[0].mechanism" in msg and "epsilon 2 " in msg and "claimed epsilon 1" in msg, msg
    with pytest.raises(ValueError, match="infinite"):  # a Gaussian is never pure DP: refused for delta = 0
        _spec(mechanism={"kind": "gaussian", "noise_multiplier": 5.0})
    with pytest.raises(ValueError, match="without claimed_epsilon"):
        validate_defender_spec({"name": "lap", "kind": "python", "target": TARGET,
                                "mechanism": {"kind": "laplace", "scale": 1.0}}, where="defenders[0]")
    # a subsampled Gaussian at sigma 1.0, q 0.05, 1000 steps has eps ~ 2.3 at 1e-5 (PLD): above a claim of 1
    with pytest.raises(ValueError, match="subsampled_gaussian"):
        _spec(claimed_delta=1e-5, mechanism={"kind": "subsampled_gaussian", "noise_multiplier": 1.0,
                                             "sample_rate": 0.05, "steps": 1000})


def test_the_claim_round_trips_through_info_json(tmp_path: Path) -> None:
    spec = _spec(mechanism={"kind": "laplace", "scale": 1.0})
    info = make_defender(spec, n_classes=10).describe()
    assert info["claimed_mechanism"] == {"kind": "laplace", "scale": 1.0}
    write_info(tmp_path, "lap", **info)
    claim = read_defender_info(tmp_path, "lap").claim
    assert claim is not None and claim.delta == 0.0 and claim.mechanism == parse_mechanism(info["claimed_mechanism"])
    assert isinstance(claim.family(), LaplaceFamily)
    assert claim.implied_for("replace_one").mechanism is None  # group privacy keeps the point, drops the curve


def test_recipes_declare_their_mechanisms() -> None:
    from privaudit.defenders.dp_sgd import dp_sgd_mechanism

    dp = validate_defender_spec({"name": "d", "kind": "dp_sgd", "epsilon": 1.0})
    m = dp_sgd_mechanism(dp, 899)
    assert (m.sample_rate, m.steps) == (dp.sample_rate(899), dp.steps(899))
    fam = m.family()
    assert isinstance(fam, SubsampledGaussianFamily)
    assert fam.epsilon(fam.theta_claim, 1e-5) <= 1.0  # PLD of the recipe at or below its opacus PRV claim
    alibi = make_defender(validate_defender_spec({"name": "a", "kind": "alibi", "epsilon": 2.0}), n_classes=10)
    assert alibi.claimed_mechanism().epsilon_at(0.0) == pytest.approx(2.0)


def _audit(tmp_path: Path, spec, s_in: np.ndarray, s_out: np.ndarray, n_train: int) -> dict:
    root = tmp_path / "canaries" / spec.name
    root.mkdir(parents=True, exist_ok=True)
    score = np.concatenate([s_in, s_out])
    included = np.concatenate([np.ones(s_in.size, bool), np.zeros(s_out.size, bool)])
    np.savez(root / "blackbox.npz", score=score, included=included)
    (root / "meta.json").write_text(json.dumps({"blackbox": {"n_train": n_train, "canary": "crafted"}}))
    info = make_defender(spec, n_classes=10).describe()
    write_info(tmp_path / "defenders", spec.name, **info)
    request = AuditRequest(spec=spec, claim=read_defender_info(tmp_path / "defenders", spec.name).claim, level=0.05,
                           default_delta=1e-5, seed=0)

    bound = bb_audit.run(request, AuditInputs(canaries_dir=tmp_path / "canaries"), bb_audit.BlackboxSettings(tune_fraction=0.25))
    return bound.diagnostics


@pytest.mark.parametrize("binary", [True, False])
def test_an_honest_laplace_trainer_is_not_refuted_declared_or_not(tmp_path: Path, binary: bool) -> None:
    """End to end on digits (binary: classes 0 and 1; multi-class: all 10): 240 + 240 real fits of the
    exactly 1-DP trainer; the gated bound stays at or below the claim, declared (Laplace curve) or not
    (pure (1, 0) polygon). A planted fault — the same trainer with 1000x less noise, still declaring
    scale 1 — is refuted by the same audit."""
    X, y = load_digits(return_X_y=True)
    if binary:
        keep = y < 2
        X, y = X[keep], y[keep]
    X = (X / 16.0).astype(np.float32)
    n_classes = int(y.max()) + 1
    from privaudit.defenders.user_target import resolve_target

    train = resolve_target(TARGET)
    res = audit_trainer(lambda Xa, ya, s: train(Xa, ya, n_classes, s, epsilon=1.0), X, y, n_classes,
                        BlackboxAuditConfig(runs_in=240, runs_out=240, tune_fraction=0.25, seed=3, level=0.05))
    declared = _audit(tmp_path / "d", _spec(mechanism={"kind": "laplace", "scale": 1.0}),
                      res.scores_in, res.scores_out, len(y))
    bare = _audit(tmp_path / "b", _spec(), res.scores_in, res.scores_out, len(y))
    assert declared["curve"] == "laplace" and bare["curve"] == "eps_delta"
    for block in (declared, bare):
        assert block["refutes_claimed_curve"] is False and block["eps_lower_bound"] <= 1.0, block
    broken = audit_trainer(lambda Xa, ya, s: train(Xa, ya, n_classes, s, epsilon=1000.0), X, y, n_classes,
                           BlackboxAuditConfig(runs_in=240, runs_out=240, tune_fraction=0.25, seed=3, level=0.05))
    caught = _audit(tmp_path / "x", _spec(mechanism={"kind": "laplace", "scale": 1.0}),
                    broken.scores_in, broken.scores_out, len(y))
    assert caught["refutes_claimed_curve"] is True and caught["eps_lower_bound"] > 1.0, caught


def test_polygon_family_without_a_claim_is_the_assumption_free_bound() -> None:
    from privaudit.claims.claim import claim_family
    from privaudit.stats.gdp_runs import rate_epsilon

    fam = claim_family(None, 1e-5)
    assert isinstance(fam, EpsDeltaFamily)
    assert fam.theta_star(0.02, 0.4) == pytest.approx(rate_epsilon(0.02, 0.4, 1e-5))


@pytest.mark.parametrize("mechanism,needle", [
    ({"kind": "laplace", "scale": 0.5},
     "defenders[0].mechanism: the declared laplace mechanism has epsilon 2 at the claimed delta 0, above the claimed "
     "epsilon 1"),
    ({"kind": "laplace", "scale": -1}, "defenders[0].mechanism.laplace.scale"),
    ({"kind": "staircase"}, "defenders[0].mechanism"),
])
def test_the_first_stage_refuses_a_bad_mechanism_in_one_line(tmp_path: Path, mechanism: dict, needle: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33 item 6: `dvc repro` stops at its first stage (user_code), one line naming the key, nothing written."""
    import yaml

    from stages import user_code as stage

    root = Path(__file__).resolve().parents[2]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["defenders"] = [{"name": "lap", "kind": "python", "target": TARGET, "claimed_epsilon": 1.0,
                            "claimed_delta": 0, "mechanism": mechanism}]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / "user_code.json"
    code = stage.main(["--params", str(tmp_path / "params.yaml"), "--out", str(out), "--repo", str(root)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and not out.exists()
    assert err.startswith("stage user_code failed:") and needle in err and "\n" not in err, err
