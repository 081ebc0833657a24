"""The release run is watched and pooled (issue 27): what the defenders stage trains is what the audit measures.

The ``defenders`` stage trains every observable defender inside ``privaudit.hooks.recording`` (the
shadow canary leaves the released bits unchanged) and writes what it saw beside the model; the
white-box audit pools it with its own runs. A loop that behaves differently in the run that is
released — its first call, or whenever it thinks it is not audited — is then measured.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from privaudit.audits import whitebox
from privaudit.audits.protocol import AuditInputs, AuditRequest, DefenderData
from privaudit.audits.whitebox import python_trainer, whitebox_audit
from privaudit.claims.claim import PrivacyClaim
from privaudit.config import WhiteboxParams
from privaudit.defenders.registry import validate_defender_spec
from privaudit.defenders.release_watch import (OBSERVATIONS_FILE, WATCH_FILE, ReleaseWatch, load_observations,
                                               read_release_watch, record_release, release_canary_seed,
                                               save_observations, write_release_watch)
from privaudit.defenders.trained_files import train_one, train_release, write_defender
from privaudit.features.feature_set import FeatureSet
from privaudit.stats.observations import RunObservations

from privaudit.testing.planted.opacus_bugs import tiny_data
from privaudit.testing.planted.opacus_loops import LOOPS, first_call_loop

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook", "ignore:.*empty")

DP_SGD = {"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "delta": 1e-5, "epochs": 3, "batch_size": 20, "lr": 0.5,
          "max_grad_norm": 1.0}


def _feature_set(n_defender: int = 200, n_reserved: int = 100) -> FeatureSet:
    X, y = tiny_data(n=n_defender + n_reserved)
    is_defender = np.arange(len(y)) < n_defender
    return FeatureSet(X=X, y=y, ids=np.array([f"s{i}" for i in range(len(y))]), is_defender=is_defender,
                      n_classes=3)


def _weights(model) -> list[torch.Tensor]:
    return [t.detach().clone() for t in model.net.state_dict().values()]


# --------------------------------------------------------------------------- (a) the same bits


def test_the_dp_sgd_release_run_is_recorded_and_releases_the_same_bits(tmp_path: Path) -> None:
    spec = validate_defender_spec(DP_SGD)
    fs = _feature_set()
    plain_model, plain_outputs, plain_info = train_one(spec, fs, 7, "cpu")
    t = train_release(spec, fs, 7, "cpu", canary_scale=4.0)
    assert t.watch is not None and t.watch.observed and t.watch.changes == ()
    assert t.watch.observations.steps == t.info["steps"] == 30
    assert t.watch.seed == release_canary_seed(7, "dp")
    for a, b in zip(_weights(plain_model), _weights(t.model)):
        assert torch.equal(a, b)  # the canary never entered a step
    write_defender(tmp_path / "plain", plain_model, plain_outputs, plain_info)
    write_defender(tmp_path / "watched", t.model, t.outputs, t.info, t.watch)
    for name in ("model.safetensors", "outputs.parquet", "info.json"):  # the stage's committed outputs
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "watched" / name).read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "watched").iterdir()) == sorted(
        ["model.safetensors", "outputs.parquet", "info.json", WATCH_FILE, OBSERVATIONS_FILE])


def test_defenders_that_are_not_observable_are_not_recorded() -> None:
    spec = validate_defender_spec({"name": "mlp", "kind": "torch_mlp", "hidden": [], "epochs": 2, "batch_size": 50})
    assert train_release(spec, _feature_set(), 7, "cpu", canary_scale=4.0).watch is None


def test_release_watch_files_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    full = RunObservations.from_noise(rng.standard_normal((5, 6)), [3, 4, 5, 0, 2], 1.0, noise_scale=2.0,
                                      declared_dataset_size=50, declared_noise_multiplier=2.0,
                                      declared_max_grad_norm=1.0)
    bare = RunObservations.from_noise(rng.standard_normal((4, 3)), [1, 2, 3, 4], [1.0, np.nan, 1.0, 1.0])
    for i, obs in enumerate((full, bare)):
        save_observations(tmp_path / f"{i}.npz", obs)
        back = load_observations(tmp_path / f"{i}.npz")
        for field in ("batch_rows", "sensitivity", "noise_sq", "noise_quartic", "noise_cos", "coord_sq",
                      "noise_scale", "coord_sq_scaled"):
            a, b = getattr(obs, field), getattr(back, field)
            assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), field
        for field in ("declared_dataset_size", "declared_noise_multiplier", "declared_max_grad_norm"):
            assert getattr(obs, field) == getattr(back, field), field
    watch = ReleaseWatch(seed=3, canary_scale=4.0, observations=full, changes=("parameter w changed",))
    write_release_watch(tmp_path / "d", watch)
    back = read_release_watch(tmp_path / "d")
    assert back.observed and back.changes == watch.changes and back.seed == 3 and back.observations.steps == 5
    unobserved = ReleaseWatch(seed=3, canary_scale=4.0, observations=None, reason="never called watch")
    write_release_watch(tmp_path / "u", unobserved)
    assert read_release_watch(tmp_path / "u") == unobserved and not (tmp_path / "u" / OBSERVATIONS_FILE).exists()
    with pytest.raises(FileNotFoundError, match="rerun the defenders stage"):
        read_release_watch(tmp_path / "missing")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.npz.*rerun the defenders stage"):
        load_observations(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="either observations or the reason"):
        ReleaseWatch(seed=3, canary_scale=4.0, observations=None)


# --------------------------------------------------------------------------- (b)-(d) loops the release run exposes


def _release_then_audit(train, X, y, *, release: bool = True):
    _, watch = record_release(lambda: train(X, y, 3, 11), seed=3, canary_scale=4.0)  # the first call: released
    return whitebox_audit(python_trainer(train, 3), X, y, runs=2, level=0.05, seed=2,
                          release=watch if release else None)


def test_a_loop_without_noise_in_its_first_call_is_caught_through_the_release_run() -> None:
    X, y = tiny_data(n=200)
    claim = LOOPS["correct"].claim(len(X))
    unseen = _release_then_audit(first_call_loop("noiseless"), X, y, release=False)
    assert unseen.checks_passed and not unseen.overclaims(claim)  # the audit runs alone are honest
    res = _release_then_audit(first_call_loop("noiseless"), X, y)
    assert res.runs == 3 and math.isinf(res.epsilon) and res.overclaims(claim), (res.epsilon, res.reasons)


def test_fine_tuning_in_the_release_run_only_is_caught() -> None:
    X, y = tiny_data(n=200)
    res = _release_then_audit(first_call_loop("finetune_after_dp"), X, y)
    assert math.isinf(res.epsilon) and "release_model_watched" in res.failed_checks
    assert ("release run: parameter Linear.weight (3, 8) changed outside a watched DP step (after the last watched "
            "step)") in res.reasons[0], res.reasons[0]


def test_branch_on_recording_releases_its_honest_branch() -> None:
    X, y = tiny_data(n=200)
    train = LOOPS["branch_on_recording"].train
    released, watch = record_release(lambda: train(X, y, 3, 11), seed=3, canary_scale=4.0)
    honest = LOOPS["correct"].train(X, y, 3, 11)
    noiseless = train(X, y, 3, 11)  # unrecorded: the branch the release used to take
    assert all(torch.equal(a, b) for a, b in zip(_weights(released), _weights(honest)))
    assert not all(torch.equal(a, b) for a, b in zip(_weights(released), _weights(noiseless)))
    res = whitebox_audit(python_trainer(train, 3), X, y, runs=2, seed=2, release=watch, level=0.05)
    assert res.runs == 3 and res.checks_passed and not res.overclaims(LOOPS["branch_on_recording"].claim(len(X)))


def test_an_honest_release_run_passes_and_tightens_the_pool() -> None:
    X, y = tiny_data(n=200)
    claim = LOOPS["correct"].claim(len(X))
    alone = _release_then_audit(first_call_loop("correct"), X, y, release=False)
    pooled = _release_then_audit(first_call_loop("correct"), X, y)
    assert pooled.checks_passed and pooled.runs == alone.runs + 1
    assert math.isfinite(pooled.epsilon) and not pooled.overclaims(claim)


# --------------------------------------------------------------------------- the audit protocol reads data/defenders


def _request(spec) -> AuditRequest:
    return AuditRequest(spec=spec, claim=PrivacyClaim(1.0, 1e-5, "add_remove"), level=0.05, default_delta=1e-5,
                        seed=1)


def test_the_whitebox_audit_pools_the_release_run_the_defenders_stage_wrote(tmp_path: Path) -> None:
    spec = validate_defender_spec(DP_SGD)
    fs = _feature_set()
    t = train_release(spec, fs, 7, "cpu", canary_scale=4.0)
    write_defender(tmp_path / "dp", t.model, t.outputs, t.info, t.watch)
    X, y = fs.defender
    inputs = AuditInputs(defender_data=DefenderData(X, y, 3), defenders_dir=tmp_path)
    bound = whitebox.run(_request(spec), inputs, WhiteboxParams(runs=1))
    block = bound.block()
    assert block["release_run_observed"] is True and block["runs"] == 2 and block["audit_runs"] == 1
    assert not block["failed_checks"] and block["eps_lower_bound"] <= 1.0 + 1e-9
    assert "the release run and 1 audit runs" in bound.lines[0]
    no_release = whitebox.run(_request(spec), AuditInputs(defender_data=DefenderData(X, y, 3)),
                              WhiteboxParams(runs=1)).block()
    assert no_release["release_run_observed"] is False and no_release["runs"] == 1
    with pytest.raises(ValueError, match="canary_scale=4.0 but the audit uses 3.0.*rerun the defenders stage"):
        whitebox.run(_request(spec), inputs, WhiteboxParams(runs=1, canary_scale=3.0))
    (tmp_path / "dp" / WATCH_FILE).unlink()
    with pytest.raises(ValueError, match=r"defender 'dp'.*release_watch.json not found.*rerun the defenders stage"):
        whitebox.run(_request(spec), inputs, WhiteboxParams(runs=1))


def test_a_release_run_that_was_not_observed_fails_the_audit(tmp_path: Path) -> None:
    """The audit runs call watch, the release run did not (a loop that watches only when audited)."""
    spec = validate_defender_spec(DP_SGD)
    fs = _feature_set()
    X, y = fs.defender
    write_release_watch(tmp_path / "dp", ReleaseWatch(
        seed=1, canary_scale=4.0, observations=None,
        reason="the trainer never called privaudit.hooks.watch(optimizer, dataset_size=len(X)) during the release run"))
    block = whitebox.run(_request(spec), AuditInputs(defender_data=DefenderData(X, y, 3), defenders_dir=tmp_path),
                         WhiteboxParams(runs=1)).block()
    assert block["unbounded"] and block["release_run_observed"] is False and block["runs"] == 1
    assert "release run: not observed (the trainer never called privaudit.hooks.watch" in block["failed_checks"][0]
