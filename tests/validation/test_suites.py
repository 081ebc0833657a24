"""The GX suites: sound inputs pass; each kind of damage fails naming suite, check and offending rows."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.data.sources import SourceData
from privaudit.data.sources.base import make_ids
from privaudit.validation import (
    ValidationFailed,
    validate_canary_stats,
    validate_defender_outputs,
    validate_features,
    validate_metrics,
    validate_source,
)
from tests.import_graph import ROOT


def _source(n: int = 12, d: int = 3, c: int = 3) -> SourceData:
    rng = np.random.default_rng(0)
    return SourceData(X=rng.normal(size=(n, d)).astype(np.float32), y=(np.arange(n) % c).astype(np.int64),
                      ids=make_ids("t", n), meta={"name": "t", "n_classes": c, "class_names": list("abc")[:c],
                                                  "modality": "tabular", "image_shape": None, "origin": "test"})


def _unchecked(data: SourceData, **changes: object) -> SourceData:
    """A SourceData with ``changes`` applied, bypassing its constructor checks (as a buggy source might)."""
    obj = object.__new__(SourceData)
    for f in dataclasses.fields(SourceData):
        object.__setattr__(obj, f.name, changes.get(f.name, getattr(data, f.name)))
    return obj


def _fails(fn, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_source_passes_and_catches_every_defect() -> None:
    data = _source()
    validate_source(data)
    X = data.X.copy()
    X[4, 1], X[7, 0] = np.nan, -np.inf
    y = data.y.astype(np.float64)
    y[2], y[5] = 1.5, 3.0
    ids = data.ids.copy()
    ids[3] = ids[0]
    msg = _fails(validate_source, _unchecked(data, X=X, y=y, ids=ids))
    assert "validation suite 'source' failed" in msg
    assert "features are finite" in msg and "offending rows [4, 7]" in msg
    assert "labels are integers in [0, 3)" in msg and "offending values [1.5, 3.0]" in msg
    assert "ids are unique" in msg and "'t-00000'" in msg


def test_source_row_count_and_lengths() -> None:
    data = _source()
    msg = _fails(validate_source, data, min_rows=50)
    assert "at least 50 rows" in msg and "observed 12" in msg
    msg = _fails(validate_source, _unchecked(data, y=data.y[:-2]))
    assert "X and y have the same number of rows" in msg
    msg = _fails(validate_source, _unchecked(data, ids=np.array([""] + list(data.ids[1:]))))
    assert "ids are non-null" in msg and "offending rows [0]" in msg


def test_features_alignment_dimension_finiteness() -> None:
    rng = np.random.default_rng(1)
    ids = make_ids("t", 10)
    X = rng.normal(size=(10, 4)).astype(np.float32)
    validate_features(X, ids, ids, expected_dim=4)
    validate_features(X, ids, ids)
    msg = _fails(validate_features, X, ids[::-1], ids, 4)
    assert "aligned with the source ids" in msg and "offending rows [0, 1, 2, 3, 4]" in msg
    msg = _fails(validate_features, X, ids, ids, 5)
    assert "feature dimension is 5" in msg and "offending values [4]" in msg
    msg = _fails(validate_features, X[:, 0], ids, ids)
    assert "2-D (n, d)" in msg
    msg = _fails(validate_features, X[:8], ids[:8], ids)
    assert "as many feature rows as source samples" in msg
    bad = X.copy()
    bad[6, 2] = np.inf
    assert "offending rows [6]" in _fails(validate_features, bad, ids, ids, 4)


def _outputs(n: int = 8, c: int = 3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(c), size=n)
    y = np.arange(n) % c
    frame = pd.DataFrame({"id": make_ids("t", n), "role": ["defender", "reserved"] * (n // 2), "label": y,
                          "loss": -np.log(p[np.arange(n), y]), "correct": p.argmax(1) == y})
    return pd.concat([frame, pd.DataFrame(p, columns=[f"p_{k}" for k in range(c)])], axis=1)


def test_defender_outputs_contract() -> None:
    out = _outputs()
    validate_defender_outputs(out, 3, out["id"].to_numpy())
    bad = out.copy()
    bad.loc[2, "p_0"] += 0.01
    msg = _fails(validate_defender_outputs, bad, 3, out["id"].to_numpy())
    assert "validation suite 'defender_outputs' failed" in msg and "sum to 1" in msg and "'t-00002'" in msg
    bad = out.copy()
    bad.loc[1, ["p_0", "p_1", "p_2"]] = [1.2, -0.2, 0.0]
    msg = _fails(validate_defender_outputs, bad, 3, out["id"].to_numpy())
    assert "p_* are >= 0" in msg and "p_* are <= 1" in msg
    bad = out.copy()
    bad.loc[3, "loss"] = np.inf
    bad.loc[4, "loss"] = np.nan
    msg = _fails(validate_defender_outputs, bad, 3, out["id"].to_numpy())
    assert "loss is finite and >= 0" in msg and "loss is present" in msg
    dup = pd.concat([out, out.iloc[:1]], ignore_index=True)
    msg = _fails(validate_defender_outputs, dup, 3, out["id"].to_numpy())
    assert "one row per sample" in msg and "duplicate ids" in msg
    msg = _fails(validate_defender_outputs, out.drop(columns=["p_2"]), 3, out["id"].to_numpy())
    assert "required output column exists" in msg and "'p_2'" in msg
    stranger = out.copy()
    stranger.loc[5, "id"] = "x-00099"
    msg = _fails(validate_defender_outputs, stranger, 3, out["id"].to_numpy())
    assert "ids are those of the scored samples" in msg and "offending rows ['x-00099']" in msg
    null_id = out.copy()
    null_id.loc[6, "id"] = None
    msg = _fails(validate_defender_outputs, null_id, 3, out["id"].to_numpy())
    assert "ids are non-null" in msg and "ids are those of the scored samples" not in msg


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=st.integers(2, 12), n=st.integers(2, 30), seed=st.integers(0, 2**16))
def test_any_softmax_output_passes_and_any_shift_fails(c: int, n: int, seed: int) -> None:
    """Property: rows from a softmax always pass; moving mass 1e-4 out of one row always fails."""
    n += n % 2
    out = _outputs(n, c, seed)
    validate_defender_outputs(out, c, out["id"].to_numpy())
    bad = out.copy()
    row = seed % n
    bad.loc[row, "p_0"] = max(bad.loc[row, "p_0"] - 1e-4, 0.0) if bad.loc[row, "p_0"] >= 1e-4 else bad.loc[row, "p_0"] + 1e-4
    assert f"'t-{row:05d}'" in _fails(validate_defender_outputs, bad, c, out["id"].to_numpy())


def _game3(n: int = 6, c: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    true = np.arange(n) % c
    pair = np.stack([(true + 1) % c, (true + 2) % c], axis=1)
    return {"canary_index": np.arange(n) * 2, "true_label": true, "label_pair": pair,
            "bit": rng.integers(0, 2, n), "proba": rng.dirichlet(np.ones(c), size=n).astype(np.float32)}


def test_canary_stats_game3() -> None:
    g = _game3()
    validate_canary_stats("game3", g)
    msg = _fails(validate_canary_stats, "game3", {**g, "bit": np.array([0, 1, 2, 1, 0, 1])})
    assert "validation suite 'canaries' failed" in msg and "bit outcomes are 0/1" in msg and "offending rows [2]" in msg
    msg = _fails(validate_canary_stats, "game3", {**g, "proba": g["proba"][:5]})
    assert "one row per canary" in msg and "'proba'" in msg
    pair = g["label_pair"].copy()
    pair[1, 0] = g["true_label"][1]
    assert "two distinct wrong labels" in _fails(validate_canary_stats, "game3", {**g, "label_pair": pair})
    msg = _fails(validate_canary_stats, "game3", {k: v for k, v in g.items() if k != "bit"})
    assert "required game3 array present" in msg


def test_canary_stats_lidp() -> None:
    rng = np.random.default_rng(3)
    loss_in, loss_null = rng.exponential(size=(5, 3)), rng.exponential(size=(5, 4))
    validate_canary_stats("lidp", {"loss_in": loss_in, "loss_null": loss_null})
    validate_canary_stats("lidp", {"x": (loss_in < 1).astype(float), "y": (loss_null < 1).astype(float)})
    bad = loss_in.copy()
    bad[2, 1] = np.inf
    msg = _fails(validate_canary_stats, "lidp", {"loss_in": bad, "loss_null": loss_null})
    assert "loss_in losses finite and >= 0" in msg and "offending rows [2]" in msg
    msg = _fails(validate_canary_stats, "lidp", {"loss_in": loss_in[:1], "loss_null": loss_null[:1]})
    assert "at least 2 trials" in msg
    msg = _fails(validate_canary_stats, "lidp", {"loss_in": loss_in, "loss_null": loss_null[:4]})
    assert "one row per trial" in msg and "'loss_null'" in msg
    msg = _fails(validate_canary_stats, "lidp", {"x": np.full((3, 2), 0.5), "y": np.zeros((3, 2))})
    assert "x outcomes are 0/1" in msg
    # random-gradient statistics <c, theta> are signed: negative is fine, NaN/inf and ragged rows are not
    stat_in, stat_null = rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    validate_canary_stats("lidp", {"stat_in": stat_in, "stat_null": stat_null})
    bad = stat_null.copy()
    bad[4, 0] = np.nan
    msg = _fails(validate_canary_stats, "lidp", {"stat_in": stat_in, "stat_null": bad})
    assert "stat_null" in msg and "offending rows [4]" in msg
    msg = _fails(validate_canary_stats, "lidp", {"stat_in": stat_in, "stat_null": stat_null[:3]})
    assert "one row per trial" in msg
    with pytest.raises(ValueError, match="'game3', 'lidp' or 'blackbox'"):
        validate_canary_stats("game4", {})  # type: ignore[arg-type]


LTU = {"m": {"accuracy": 0.6, "privacy": 0.8, "privacy_stderr": 0.02, "utility": 0.9, "utility_stderr": 0.01,
             "rounds": 200, "attacker": "loss_gap",
             "attackers": {"loss_gap": {"accuracy": 0.6, "privacy": 0.8, "privacy_stderr": 0.02, "rounds": 200}}}}
AUDIT = {"m": {"claimed_epsilon": None,
               "game3": {"eps_low": 0.0, "eps_high": None, "canaries": 40, "acgr": {"eps_low": 1.0, "eps_high": None}},
               "lidp": {"eps_lower_bound": 0.3, "eps_lower_bound_k1": 0.1, "trials": 6, "canaries": 2,
                        "delta": 1e-5, "beta": 0.05, "violation": False}}}
BOUNDS = {"m": {"thudi": None, "yeom": None, "erlingsson": None, "sablayrolles": None, "mip_eta": None,
                "empirical_accuracy": 0.6, "p_member": 0.5, "exceeds_theory": False}}
GATE = {"passed": True, "reasons": [], "defenders": {"m": {"passed": True, "reasons": []}}}


def test_metrics_contracts_pass() -> None:
    for kind, value in (("ltu", LTU), ("audit", AUDIT), ("bounds", BOUNDS), ("gate", GATE)):
        validate_metrics(kind, value)  # type: ignore[arg-type]
    validate_metrics("audit", {"m": {"game3": {**AUDIT["m"]["game3"], "eps_high": float("inf")}}})


def test_metrics_contract_violations_named_by_key() -> None:
    bad = {"m": {**AUDIT["m"], "claimed_epsilon": -1.0,
                 "game3": {**AUDIT["m"]["game3"], "eps_low": float("nan")},
                 "lidp": {k: v for k, v in AUDIT["m"]["lidp"].items() if k != "trials"}}}
    msg = _fails(validate_metrics, "audit", bad)
    assert "validation suite 'metrics' failed" in msg
    assert "'m.lidp.trials'" in msg and "'m.claimed_epsilon'" in msg and "'m.game3.eps_low'" in msg
    msg = _fails(validate_metrics, "ltu", {"m": {**LTU["m"], "privacy": 1.2, "rounds": 2.5}})
    assert "'m.privacy'" in msg and "'m.rounds'" in msg and "whole numbers" in msg
    msg = _fails(validate_metrics, "bounds", {"m": {**BOUNDS["m"], "thudi": 1.5}})
    assert "'m.thudi'" in msg
    msg = _fails(validate_metrics, "gate", {"passed": "yes", "reasons": []})
    assert "'defenders'" in msg and "flags are true/false" in msg
    assert "'m (an object)'" in _fails(validate_metrics, "ltu", {"m": 0.5})
    with pytest.raises(ValueError, match="metrics kind"):
        validate_metrics("nope", {})  # type: ignore[arg-type]


def test_canary_stats_blackbox() -> None:
    """The black-box runs' arrays: signed finite scores, 0/1 inclusion, both sides present."""
    score = np.linspace(-2.0, 2.0, 10)
    included = (np.arange(10) % 2 == 0).astype(np.int8)
    validate_canary_stats("blackbox", {"score": score, "included": included})
    bad = score.copy()
    bad[3] = np.nan
    msg = _fails(validate_canary_stats, "blackbox", {"score": bad, "included": included})
    assert "score" in msg and "offending rows [3]" in msg
    msg = _fails(validate_canary_stats, "blackbox", {"score": score, "included": np.ones(10, np.int8)})
    assert "at least 2 runs with and 2 without the canary" in msg
    msg = _fails(validate_canary_stats, "blackbox", {"score": score, "included": included * 2})
    assert "included" in msg and "0/1" in msg
    msg = _fails(validate_canary_stats, "blackbox", {"score": score})
    assert "required blackbox array present" in msg


def test_a_passing_batch_is_validated_once_for_pass_fail_and_a_failing_one_again_completely(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """GX's complete result format (offending rows) is asked for only where a batch failed: same outcomes, less
    work for the batches that pass (privaudit.validation.core)."""
    from great_expectations.datasource.fluent.interfaces import Batch

    formats: list[str] = []
    original = Batch.validate

    def spy(self, suite, result_format="SUMMARY", **kw):  # type: ignore[no-untyped-def]
        formats.append(result_format)
        return original(self, suite, result_format=result_format, **kw)

    monkeypatch.setattr(Batch, "validate", spy)
    validate_source(_source())
    assert formats and set(formats) == {"BOOLEAN_ONLY"}
    formats.clear()
    X = _source().X.copy()
    X[4, 1] = np.nan
    msg = _fails(validate_source, _unchecked(_source(), X=X))
    assert "offending rows [4]" in msg  # the details of the complete result
    assert formats.count("COMPLETE") == 1 and formats.count("BOOLEAN_ONLY") >= 1


def test_the_validation_benchmark_runs_both_arms() -> None:
    """``benchmarks/bench_validation.py`` with one pair: both arms validate the sound tables (a failure would raise)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "benchmarks/bench_validation.py", "--pairs", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "complete result for every batch" in proc.stdout and "pass/fail first (library)" in proc.stdout
