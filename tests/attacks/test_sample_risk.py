"""Per-sample privacy risk (privaudit.attacks.sample_risk): planted leaks are flagged, an honest
model flags nothing beyond the level, Reserved samples are never listed, report helpers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import privaudit.attacks.mia_reference as mia_reference
from privaudit.attacks.ltu import LtuData, individual_privacy_scores, run_attacker
from privaudit.attacks.ltu_evaluation import AttackerOptions, evaluate_defender, make_attacker
from privaudit.attacks.sample_risk import (
    RISK_COLUMNS,
    RiskOptions,
    benjamini_hochberg,
    bonferroni,
    population_subsets,
    risk_from_confidences,
    sample_risk,
)
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.report.figures import privacy_score_figure
from privaudit.report.tables import exposed_label, most_exposed, risk_note, risk_summary


@pytest.fixture(autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ltu stage: reproducible torch on CPU
    yield
    torch.set_num_threads(before)


def _blobs(n: int, d: int, classes: int, rng: np.random.Generator, sep: float = 2.5) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, classes, n)
    X = rng.normal(size=(n, d)) + sep * np.eye(classes, d)[y]
    return X.astype(np.float32), y.astype(np.int64)


def _planted(raw: dict, n: int = 100, planted: int = 5, seed: int = 0) -> tuple[LtuData, np.ndarray, np.ndarray]:
    """Defender / Reserved halves of 3 Gaussian classes with ``planted`` outlier rows on each side:
    on class c's side, far out on an axis of their own, labelled c + 1 — atypical, hard samples that no
    model agrees with unless it trained on them. The model trains on the Defender half (its
    outliers: the planted leak); the Reserved outliers are just as hard but never seen."""
    spec = validate_defender_spec(raw)
    rng = np.random.default_rng(seed)
    X, y = _blobs(2 * n, 10, 3, rng, sep=4.0)
    is_def = np.zeros(2 * n, bool)
    is_def[rng.permutation(2 * n)[:n]] = True
    leak = rng.choice(np.flatnonzero(is_def), planted, replace=False)
    hard = rng.choice(np.flatnonzero(~is_def), planted, replace=False)
    # each outlier on its own free axis (3..9, either sign), so that no two support each other
    free = rng.permutation([(a, s) for a in range(3, 10) for s in (-1, 1)])[: 2 * planted]
    for rows, offsets in ((leak, free[:planted]), (hard, free[planted:])):
        c = rng.integers(0, 3, len(rows))
        X[rows] = 6.0 * np.eye(3, 10)[c] + 8.0 * offsets[:, 1:] * np.eye(10)[offsets[:, 0]]
        y[rows] = (c + 1) % 3
    model = make_defender(spec, n_classes=3).fit(X[is_def], y[is_def], seed=11)
    ids = np.array([f"s{i:03d}" for i in range(2 * n)])
    data = LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=ids,
                   train_rows=np.flatnonzero(is_def), n_classes=3, spec=spec, model=model)
    return data, leak, hard


OVERFIT_MLP = {"name": "mlp", "kind": "torch_mlp", "hidden": [64], "epochs": 60, "batch_size": 16, "lr": 0.1,
               "randomness": "unseeded"}
KNN = {"name": "knn", "kind": "sklearn", "estimator": "knn", "options": {"n_neighbors": 1}, "randomness": "fixed"}


# --------------------------------------------------------------------------- planted leaks


def test_planted_leak_of_an_overfit_mlp_is_flagged_and_hard_reserved_samples_are_not() -> None:
    data, leak, hard = _planted(OVERFIT_MLP)
    assert np.all(data.proba[leak, data.y[leak]] > 0.5)  # the target memorised its wrong-label rows
    risk = sample_risk(data, np.random.default_rng(1), RiskOptions(reference_models=16))
    assert set(leak) <= set(np.flatnonzero(risk.flagged)), risk.p_value[leak]
    assert not risk.flagged[~data.is_defender].any()
    assert risk.info["reserved_flagged"] == 0 and not risk.control_hit[hard].any()
    assert np.all(risk.risk[leak] > 0) and np.all(risk.risk_low[leak] > 0)  # IN-like, interval above 0
    # the loss-rank score (App. C) puts the never-seen hard samples first: the bug this replaces
    s = -(-np.log(np.clip(data.proba[np.arange(len(data.y)), data.y], 1e-300, 1)))
    sd, sr = individual_privacy_scores(s[data.is_defender], s[~data.is_defender])
    assert np.all(sr[np.searchsorted(np.flatnonzero(~data.is_defender), hard)] == 0.0)


def test_planted_leak_of_a_knn_model_is_flagged() -> None:
    data, leak, hard = _planted(KNN, seed=3)
    risk = sample_risk(data, np.random.default_rng(2), RiskOptions(reference_models=8))
    assert set(leak) <= set(np.flatnonzero(risk.flagged))
    assert not risk.flagged[hard].any() and not risk.flagged[~data.is_defender].any()


def test_evaluate_defender_merges_risk_into_scores_and_metrics() -> None:
    data, leak, _ = _planted(OVERFIT_MLP, n=60, planted=3, seed=4)
    opts = AttackerOptions(n_jobs=1, reference_models=4)
    ev = evaluate_defender(data, 20, ["loss_gap", "lira"], np.random.default_rng(0), opts,
                           RiskOptions(reference_models=8))
    assert list(ev.scores.columns) == ["id", "role", "score", *RISK_COLUMNS]
    assert len(ev.scores) == len(data.y)
    m = ev.metrics(0.9, 0.01)
    block = m["sample_risk"]
    for key in ("method", "reference_models", "correction", "level", "tested", "flagged", "p_cutoff",
                "reserved_tested", "reserved_flagged", "expected_false_flags", "empirical_fdr"):
        assert key in block
    assert block["tested"] == 60 and block["reserved_tested"] == 60 and block["level"] == 0.05
    flagged_ids = set(ev.scores.loc[ev.scores["flagged"], "id"])
    assert flagged_ids <= set(data.ids[data.is_defender])
    # the same defender without features: skipped, with the reason
    bare = LtuData.from_outputs(data.proba, data.y, data.is_defender)
    ev2 = evaluate_defender(bare, 10, ["loss_gap"], np.random.default_rng(0), opts, RiskOptions())
    assert "not_computed" in ev2.metrics(0.9, 0.01)["sample_risk"] and ev2.risk is None


# --------------------------------------------------------------------------- no leak


def test_honest_model_flags_nothing_beyond_the_level_over_repetitions() -> None:
    """M does not depend on D_D at all (trained on other data of the same distribution):
    every sample is a null; BH at 0.05 may flag something in at most ~5 % of repetitions."""
    spec = validate_defender_spec({"name": "lr", "kind": "logistic_regression", "randomness": "fixed"})
    reps, any_flag, control = 24, 0, 0
    for rep in range(reps):
        rng = np.random.default_rng(100 + rep)
        X, y = _blobs(160, 8, 3, rng, sep=1.5)
        Xo, yo = _blobs(80, 8, 3, rng, sep=1.5)  # the honest model's own, other data
        model = make_defender(spec, n_classes=3).fit(Xo, yo, seed=0)
        is_def = np.zeros(160, bool)
        is_def[rng.permutation(160)[:80]] = True
        data = LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=np.arange(160).astype(str),
                       train_rows=np.flatnonzero(is_def), n_classes=3, spec=spec, model=model)
        risk = sample_risk(data, np.random.default_rng(rep), RiskOptions(reference_models=8, bootstrap=0))
        any_flag += int(risk.flagged.any())
        control += int(risk.control_hit.any())
        assert 0.0 <= risk.info["reserved_share_p_below_level"] <= 0.2
    # Binomial(24, 0.05): P(>= 5) < 0.7 %
    assert any_flag <= 4, any_flag
    assert control <= 4, control


def _paired_inside(n: int, K: int, rng: np.random.Generator) -> np.ndarray:
    inside = np.zeros((n, K), bool)
    for k in range(0, K, 2):
        half = rng.permutation(n)[: n // 2]
        inside[half, k] = True
        inside[np.setdiff1d(np.arange(n), half), k + 1] = True
    return inside


def _sig(f: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-f))


def test_null_confidences_flag_at_most_the_level_and_a_shifted_target_is_recalibrated() -> None:
    """Pure statistics: Gaussian φ per sample, the target an OUT draw for everyone (no leak)."""
    rng = np.random.default_rng(0)
    n, K = 400, 16
    mu, sd = rng.normal(0, 1.5, n), rng.uniform(0.3, 1.5, n)
    inside = _paired_inside(n, K, rng)
    phi_ref = mu[:, None] + sd[:, None] * rng.normal(size=(n, K)) + 2.0 * inside  # IN models more confident
    is_def = np.arange(n) < n // 2
    null_t = mu + sd * rng.normal(size=n)
    r = risk_from_confidences(_sig(null_t), _sig(phi_ref), inside, is_def, RiskOptions(bootstrap=20), rng)
    assert r.info["flagged"] == 0 and r.info["reserved_flagged"] == 0
    assert abs(np.mean(r.p_value[~is_def] <= 0.1) - 0.1) < 0.06  # roughly uniform null p-values
    # a target systematically more confident than the references everywhere (a trainer mismatch):
    # the Reserved control shifts the null, so the shift alone flags (almost) nothing
    shifted = null_t + 1.5 * sd
    r2 = risk_from_confidences(_sig(shifted), _sig(phi_ref), inside, is_def, RiskOptions(bootstrap=0), rng)
    r3 = risk_from_confidences(_sig(shifted), _sig(phi_ref), inside, is_def, RiskOptions(bootstrap=0, calibrate=False),
                               rng)
    assert r2.info["null_location"] > 1.0 and r2.info["flagged"] <= 2 < r3.info["flagged"]
    # a real leak on top of it is still found (8 sd above OUT, inside the clip |φ| <= 9.2)
    leak = np.flatnonzero(is_def & (sd < 0.8))[:5]
    leaky = shifted.copy()
    leaky[leak] = mu[leak] + 2.0 + 8 * sd[leak]
    r4 = risk_from_confidences(_sig(leaky), _sig(phi_ref), inside, is_def, RiskOptions(bootstrap=0), rng)
    assert set(leak) <= set(np.flatnonzero(r4.flagged))


# --------------------------------------------------------------------------- reserved never listed


def test_reserved_samples_are_never_flagged_or_listed() -> None:
    rng = np.random.default_rng(5)
    n, K = 200, 16
    inside = _paired_inside(n, K, rng)
    phi_ref = rng.normal(size=(n, K))
    is_def = np.arange(n) < 100
    phi_t = rng.normal(size=n)
    phi_t[150:155] = 8.0  # Reserved samples far above every reference model (e.g. a twin in D_D)
    phi_t[:3] = 8.0       # and three Defender samples
    phi_ref[[0, 1, 2, 150, 151, 152, 153, 154]] += 2.0 * inside[[0, 1, 2, 150, 151, 152, 153, 154]]  # IN-like: risk > 0
    # the parametric p-values (calibrate=False): calibrated, the five twins in the control would make
    # the three Defender samples unremarkable (tests/attacks/test_sample_risk_calibration.py)
    r = risk_from_confidences(_sig(phi_t), _sig(phi_ref), inside, is_def, RiskOptions(bootstrap=0, calibrate=False),
                              rng)
    assert set(np.flatnonzero(r.flagged)) == {0, 1, 2}
    assert r.control_hit[150:155].all() and r.info["reserved_flagged"] == 5
    assert r.info["empirical_fdr"] == 1.0  # 5 control hits × 100/100 ≥ 3 flagged: the check says "do not trust"
    frame = pd.concat([pd.DataFrame({"role": ["defender"] * 100 + ["reserved"] * 100, "score": 0.5}),
                       r.frame(np.arange(n).astype(str), is_def)], axis=1)
    frame.loc[frame["role"] == "reserved", "flagged"] = True  # even a corrupted file lists no Reserved sample
    top = most_exposed({"m": frame}, 10)["m"]
    assert set(top["role"]) == {"defender"} and set(top["id"]) == {"0", "1", "2"}


def test_shared_reference_models_for_lira_and_rmia(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    data, _, _ = _planted({"name": "lr", "kind": "logistic_regression", "randomness": "fixed"}, n=40, planted=2)
    calls = []
    real = mia_reference.train_reference_confidences

    def counting(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(mia_reference, "train_reference_confidences", counting)
    opts = AttackerOptions(n_jobs=1, reference_models=4)
    lira, rmia = make_attacker("lira", opts), make_attacker("rmia", opts)
    run_attacker(lira, data, 10, np.random.default_rng(0))
    run_attacker(rmia, data, 10, np.random.default_rng(1))
    assert len(calls) == 1  # one training for both
    assert lira.pool is not None and rmia.pool is not None
    # the same models in data order, each attacker with its own round masks
    (conf_d, _), = data.reference_cache.values()  # type: ignore[union-attr]
    assert conf_d.shape == (len(data.y), 4)


def test_reference_models_reuse_the_batched_trainer_and_skip_worker_processes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def _no(*a, **kw):  # type: ignore[no-untyped-def]
        raise AssertionError("this path must not be taken")

    data, _, _ = _planted({**OVERFIT_MLP, "epochs": 2}, n=40, planted=2)
    monkeypatch.setattr(mia_reference, "_fit_conf", _no)  # torch heads: the batched trainer only
    subsets = population_subsets(data.y, 40, 4, np.random.default_rng(0))
    conf, inside = mia_reference.train_subset_confidences(data.spec, 3, data.X, data.y, subsets,  # type: ignore[arg-type]
                                                          np.arange(4), n_jobs=2)
    assert conf.shape == inside.shape == (80, 4) and np.all(inside.sum(0) == 40)
    monkeypatch.undo()
    monkeypatch.setattr(mia_reference, "map_in_processes", _no)  # a quick sklearn fit: no worker processes
    spec = validate_defender_spec({"name": "lr", "kind": "logistic_regression", "randomness": "fixed"})
    conf2, _ = mia_reference.train_subset_confidences(spec, 3, data.X, data.y, subsets, np.arange(4), n_jobs=2)
    assert conf2.shape == (80, 4) and np.all((conf2 > 0) & (conf2 < 1))


def test_sequential_reference_fits_are_the_same_bits_for_any_n_jobs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """ltu.n_jobs 1, 2 and auto: each reference fit runs single-threaded from its own seed, so the workers
    change nothing (workers_pay patched to yes sends every fit after the first to the joblib workers)."""
    data, _, _ = _planted({**OVERFIT_MLP, "epochs": 2}, n=40, planted=2)
    spec = validate_defender_spec({"name": "lr", "kind": "logistic_regression", "randomness": "unseeded"})
    subsets = population_subsets(data.y, 40, 4, np.random.default_rng(0))
    monkeypatch.setattr(mia_reference, "workers_pay", lambda *_: True)
    one, _ = mia_reference.train_subset_confidences(spec, 3, data.X, data.y, subsets, np.arange(4), n_jobs=1)
    for jobs in (2, "auto"):
        other, _ = mia_reference.train_subset_confidences(spec, 3, data.X, data.y, subsets, np.arange(4), n_jobs=jobs)
        np.testing.assert_array_equal(one, other)
    with pytest.raises(ValueError, match="ltu.n_jobs"):
        mia_reference.joblib_jobs(0)
    assert mia_reference.joblib_jobs("auto") == -1 and mia_reference.joblib_jobs(3) == 3


# --------------------------------------------------------------------------- pieces


def test_benjamini_hochberg_and_bonferroni() -> None:
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216])
    reject, q, cutoff = benjamini_hochberg(p, level=0.05)
    assert list(np.flatnonzero(reject)) == [0, 1] and cutoff == pytest.approx(0.01)
    np.testing.assert_allclose(q[:2], [0.01, 0.04])
    assert np.all(q >= p) and np.all(q <= 1)
    reject, q, cutoff = bonferroni(p, level=0.05)
    assert list(np.flatnonzero(reject)) == [0] and cutoff == pytest.approx(0.005)
    none, _, c = benjamini_hochberg(np.array([0.5, 0.9]), level=0.05)
    assert not none.any() and c == 0.025


def test_population_subsets_are_stratified_pairs_of_the_defender_size() -> None:
    y = np.repeat(np.arange(4), [40, 30, 20, 11])
    subsets = population_subsets(y, 50, 6, np.random.default_rng(0))
    assert len(subsets) == 6 and all(len(s) == 50 for s in subsets)
    for a, b in zip(subsets[0::2], subsets[1::2]):
        assert not set(a) & set(b)  # complementary pair
    for s in subsets:
        counts = np.bincount(y[s], minlength=4)
        assert np.all(np.abs(counts - np.array([40, 30, 20, 11]) / 2) <= 1.5)
    with pytest.raises(ValueError, match="n_train"):
        population_subsets(y, len(y), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="risk_level"):
        RiskOptions(level=1.5)


def test_report_helpers_show_risk_interval_and_correction() -> None:
    rng = np.random.default_rng(1)
    n = 60
    frame = pd.DataFrame({
        "id": [f"x{i}" for i in range(n)], "role": ["defender"] * 30 + ["reserved"] * 30, "score": rng.random(n),
        "risk": rng.normal(size=n), "risk_low": -1.0, "risk_high": 1.0, "z": 0.0, "p_value": rng.random(n),
        "q_value": 1.0, "flagged": False, "control_hit": False, "risk_level": 0.05, "risk_correction": "bh",
        "risk_interval": 0.9,
    })
    assert len(most_exposed({"d": frame}, 5)["d"]) == 0  # nothing significant: nothing listed
    frame.loc[[3, 7], "flagged"] = True
    frame.loc[[3, 7], ["p_value", "risk"]] = [[1e-5, 8.0], [1e-7, 12.5]]
    frame.loc[40, "control_hit"] = True
    top = most_exposed({"d": frame}, 5)["d"]
    assert list(top["id"]) == ["x7", "x3"] and list(top.columns[:4]) == ["rank", "id", "role", "score"]
    label = exposed_label(top.iloc[0].to_dict())
    assert label.startswith("x7 (risk 12.5 [-1, 1], p = 1e-07")
    summary = risk_summary(frame)
    assert summary is not None and summary["flagged"] == 2 and summary["reserved_flagged"] == 1
    note = risk_note(summary)
    assert "Benjamini-Hochberg FDR 0.05" in note and "1 of 30 Reserved" in note and "90 % bootstrap" in note
    png = privacy_score_figure({"d": frame, "legacy": frame[["id", "role", "score"]]})
    assert png is not None and png.startswith(b"\x89PNG")
