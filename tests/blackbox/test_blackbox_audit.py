"""The many-run black-box audit in the pipeline (issue 26): runs through the canaries shards, the
``blackbox`` audit (GDP view, assumption-free bound, last-iterate ceiling) and its validity.

Ground truth: the GDP view assumes a Gaussian trade-off curve. It is checked here on the mechanism
the last-iterate heuristic says a linear DP-SGD head is (Steinke et al. 2024 §3: the canary's
coordinate is ``Binomial(T, q) + N(0, Tσ²)`` with it, ``N(0, Tσ²)`` without), whose exact ε is
known (:func:`privaudit.stats.gdp_runs.last_iterate_epsilon`): audits of that mechanism claiming its
exact ε are flagged at most at their level (simulation), and audits of a mechanism with a 4× larger
shift are caught.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privaudit.audits import blackbox as bb_audit
from privaudit.audits.protocol import AuditInputs, AuditRequest, settings_from
from privaudit.canaries.assembly import write_defender_outputs
from privaudit.canaries.blackbox_trials import blackbox_trials
from privaudit.canaries.shards import inputs_fingerprint, plan_shards, run_missing_shards
from privaudit.claims.claim import PrivacyClaim
from privaudit.config import parse_params
from privaudit.defenders.specs import validate_defender_spec
from privaudit.stats.gdp_runs import certify_scores, last_iterate_epsilon
from tests.canaries.conftest import digits_features, make_params

T, Q, SIGMA, DELTA = 100, 0.1, 1.2, 1e-5


def _mixture(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """n scores per side of the last-iterate mechanism (units of C): in = shift·Bin(T, q) + N(0, Tσ²)."""
    s = SIGMA * np.sqrt(T)
    return shift * rng.binomial(T, Q, n) + rng.normal(0.0, s, n), rng.normal(0.0, s, n)


@pytest.mark.parametrize("sigma,q,steps", [(1.2, 0.1, 100), (4.648, 64 / 899, 280), (2.578, 64 / 899, 280),
                                           (1.538, 64 / 899, 280), (1.015, 64 / 899, 280)])
def test_gdp_view_of_every_threshold_stays_below_the_exact_eps(sigma: float, q: float, steps: int) -> None:
    """The assumption, without sampling error: for the last-iterate mechanism (the digits head at claims
    1, 2, 4, 8 and one more), every threshold with FPR, FNR >= 1e-3 (what thousands of runs can
    resolve) has a GDP-converted ε below the mechanism's exact ε. (At FPR 1e-5 the σ = 4.648 row reaches
    0.977 against 0.975: the margin is thin in the far tail, which no audit of ≤ 10⁵ runs sees.)"""
    from scipy import stats

    from privaudit.stats.fdp_one_run import gdp_epsilon

    truth = last_iterate_epsilon(sigma, q, steps, DELTA).eps_exact
    s = sigma * np.sqrt(steps)
    k = np.arange(steps + 1)
    w = stats.binom.pmf(k, steps, q)
    tau = np.linspace(-3 * s, 8 * s + steps * q, 3000)
    fpr = stats.norm.sf(tau / s)
    fnr = (w[None, :] * stats.norm.cdf((tau[:, None] - k[None, :]) / s)).sum(1)
    ok = (fpr >= 1e-3) & (fnr >= 1e-3)
    mu = stats.norm.isf(fpr[ok]) - stats.norm.ppf(fnr[ok])
    worst = gdp_epsilon(float(mu.max()), DELTA)
    assert 0.9 * truth < worst < truth, (worst, truth)


def test_honest_claims_on_the_exact_mechanism_are_flagged_at_most_at_the_level() -> None:
    """300 audits (5,000 runs per side, level 0.05) of the last-iterate mechanism claiming its exact ε:
    the GDP view and the assumption-free bound exceed the claim in at most 5 % + 2.5 s.e. (≤ 24 of 300).
    The same audits do reach a claim 25 % below the truth (≥ 60 of 300), so the test has power."""
    truth = last_iterate_epsilon(SIGMA, Q, T, DELTA).eps_exact
    rng = np.random.default_rng(26)
    flags_gdp = flags_rate = below = 0
    for _ in range(300):
        s_in, s_out = _mixture(rng, 5000, 1.0)
        g, r, _, _ = certify_scores(s_in, s_out, tune_fraction=0.25, level=0.05, delta=DELTA)
        flags_gdp += g.eps_lower_bound_gdp > truth
        flags_rate += r.eps_lower_bound_rate > truth
        below += g.eps_lower_bound_gdp > 0.75 * truth
    assert flags_gdp <= 24 and flags_rate <= 24, (flags_gdp, flags_rate, truth)
    assert below >= 60, below


def test_a_four_times_larger_shift_is_caught() -> None:
    """The same mechanism with 4× the canary's per-step effect (a trainer that does not clip it) while
    claiming the honest ε: caught by the GDP view in ≥ 9 of 10 audits of 400 runs per side."""
    truth = last_iterate_epsilon(SIGMA, Q, T, DELTA).eps_exact
    rng = np.random.default_rng(27)
    caught = 0
    for _ in range(10):
        s_in, s_out = _mixture(rng, 400, 4.0)
        g, _, _, _ = certify_scores(s_in, s_out, tune_fraction=0.25, level=0.05, delta=DELTA)
        caught += g.eps_lower_bound_gdp > truth
    assert caught >= 9


def test_runs_per_side_follow_the_kind_and_the_claim() -> None:
    plan = make_params([{"name": "lr", "kind": "logistic_regression"},
                        {"name": "mlp", "kind": "torch_mlp", "hidden": [8], "epochs": 1},
                        {"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "epochs": 1},
                        {"name": "pate", "kind": "pate", "epsilon": 20.0}],
                       blackbox={"runs": 24, "runs_no_claim": 12, "sequential_runs": 10, "block": 16})
    assert [plan.blackbox_runs(n) for n in ("lr", "mlp", "dp", "pate")] == [12, 12, 24, 10]
    shards = [s for s in plan_shards(plan) if s.experiment == "blackbox"]
    by = {n: [(s.start, s.stop) for s in shards if s.defender == n] for n in ("lr", "mlp", "dp", "pate")}
    assert by["dp"] == [(0, 16), (16, 32), (32, 48)]  # whole blocks of blackbox.block models
    assert by["mlp"] == [(0, 16), (16, 24)]
    assert by["lr"][0] == (0, 4) and by["lr"][-1][1] == 24  # compute.block_trials = 4 (even) per block
    assert by["pate"][-1][1] == 20


def test_params_refuse_an_odd_block_and_name_the_key() -> None:
    raw = {"defenders": [{"name": "a", "kind": "logistic_regression"}], "blackbox": {"block": 7}}
    with pytest.raises(ValueError, match="blackbox.block.*even"):
        parse_params(raw)
    with pytest.raises(ValueError, match="blackbox.canary_scale"):
        parse_params({**raw, "blackbox": {"canary_scale": -1.0}})


def test_batched_trials_are_deterministic_and_alternate_in_and_out() -> None:
    fs = digits_features(300)
    plan = make_params([{"name": "dp", "kind": "dp_sgd", "epsilon": 4.0, "epochs": 2, "batch_size": 16}],
                       blackbox={"runs": 8, "block": 8})
    a = blackbox_trials(plan, fs, "dp", 0, 8, "cpu")
    b = blackbox_trials(plan, fs, "dp", 8, 16, "cpu")
    assert a["included"].tolist() == [1, 0] * 4 and np.all(np.isfinite(a["score"]))
    assert np.array_equal(a["score"], blackbox_trials(plan, fs, "dp", 0, 8, "cpu")["score"])
    assert not np.array_equal(a["score"], b["score"])  # block b draws from its own seed
    with pytest.raises(ValueError, match="block boundary"):
        blackbox_trials(plan, fs, "dp", 4, 8, "cpu")


NO_NOISE_TRAINER = '''import numpy as np


class Softmax:
    def __init__(self, W, b):
        self.W, self.b = W, b

    def predict_proba(self, X):
        z = np.asarray(X, np.float64) @ self.W + self.b
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def state_dict(self):
        return {"W": self.W, "b": self.b}


def train(X, y, n_classes, seed, clip=None, sigma=0.0):
    """Full-batch gradient descent on softmax regression; per-example clipping to `clip` and Gaussian noise
    sigma * clip when given: the 'DP-SGD' of a plain numpy loop (sigma = 0: no noise at all)."""
    rng = np.random.default_rng(seed)
    X = np.asarray(X, np.float64)
    W, b = np.zeros((X.shape[1], n_classes)), np.zeros(n_classes)
    Y = np.eye(n_classes)[y]
    for _ in range(20):
        z = X @ W + b
        z -= z.max(1, keepdims=True)
        P = np.exp(z)
        P /= P.sum(1, keepdims=True)
        G = P - Y
        gW, gb = X.T @ G, G.sum(0)
        if clip is not None:
            norms = np.sqrt((G ** 2).sum(1) * (1 + (X ** 2).sum(1)))
            f = np.minimum(1.0, clip / np.maximum(norms, 1e-12))
            gW, gb = X.T @ (G * f[:, None]), (G * f[:, None]).sum(0)
            gW = gW + rng.normal(0, sigma * clip, gW.shape)
            gb = gb + rng.normal(0, sigma * clip, gb.shape)
        W -= 0.5 * gW / len(X)
        b -= 0.5 * gb / len(X)
    return Softmax(W, b)
'''


def _python_defender(tmp_path: Path, options: dict) -> tuple:
    (tmp_path / "nonoise_trainer.py").write_text(NO_NOISE_TRAINER)
    spec = {"name": "plain", "kind": "python", "target": f"{tmp_path / 'nonoise_trainer.py'}:train",
            "options": options, "claimed_epsilon": 1.0, "claimed_delta": 1e-5}
    plan = make_params([spec], blackbox={"sequential_runs": 40}, lidp={"trials": 2, "tau_quantiles": 4},
                       game3={"canaries": 10, "tau_steps": 2})
    return plan, validate_defender_spec(spec)


def _audit_python(tmp_path: Path, options: dict):
    fs = digits_features(400)
    plan, spec = _python_defender(tmp_path, options)
    root = tmp_path / "shards"
    run_missing_shards(root, plan, fs, plan_shards(plan), "cpu")
    out = tmp_path / "canaries"
    out.mkdir()
    write_defender_outputs(out, root, plan, plan_shards(plan), "plain", {}, inputs_fingerprint(fs), fs)
    meta = json.loads((out / "plain" / "meta.json").read_text())["blackbox"]
    request = AuditRequest(spec=spec, claim=PrivacyClaim(1.0, 1e-5, "add_remove"), level=0.05 / 6,
                           default_delta=1e-5, seed=0)
    settings = settings_from(bb_audit.SETTINGS, parse_params({"defenders": [{"name": "x", "kind": "logistic_regression"}]}).blackbox)
    return bb_audit.run(request, AuditInputs(canaries_dir=out), settings), meta


def test_a_plain_numpy_loop_without_noise_claiming_eps1_is_refuted_through_the_shards(tmp_path: Path) -> None:
    """A ``kind: python`` numpy loop with no clipping and no noise claiming ε = 1: its 40 + 40 final models
    (canaries-stage shards) give an ε̂ above the claim at a sixth of gate.beta; the block states the
    threat model and the assumption, and there is no DP-SGD ceiling for a user's loop."""
    bound, meta = _audit_python(tmp_path, {})
    assert meta["runs_per_side"] == 40 and "crafted input canary" in meta["canary"]
    assert bound.epsilon > 1.0, bound.diagnostics
    block = bound.block()
    assert block["runs_in"] == block["runs_out"] == 40 and block["tuning_in"] == 8
    assert block["threat_model"].startswith("black-box") and "Gaussian" in block["assumption"]
    assert block["ceiling"] is None and block["level"] == pytest.approx(0.05 / 6)


def test_the_audit_names_a_missing_result_and_reports_the_ceiling(tmp_path: Path) -> None:
    spec = validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "epochs": 20})
    request = AuditRequest(spec=spec, claim=PrivacyClaim(1.0, 1e-5, "add_remove"), level=0.01, default_delta=1e-5,
                           seed=0)
    settings = settings_from(bb_audit.SETTINGS, parse_params({"defenders": [{"name": "x", "kind": "logistic_regression"}]}).blackbox)
    with pytest.raises(FileNotFoundError, match="blackbox.npz is missing.*dvc repro canaries"):
        bb_audit.run(request, AuditInputs(canaries_dir=tmp_path), settings)
    (tmp_path / "dp").mkdir()
    rng = np.random.default_rng(0)
    n = 500
    np.savez(tmp_path / "dp" / "blackbox.npz", score=np.concatenate([rng.normal(0.3, 1, n), rng.normal(0, 1, n)]),
             included=np.r_[np.ones(n, np.int8), np.zeros(n, np.int8)])
    (tmp_path / "dp" / "meta.json").write_text(json.dumps({"blackbox": {"n_train": 898, "canary": "c"}}))
    bound = bb_audit.run(request, AuditInputs(canaries_dir=tmp_path), settings)
    ceiling = bound.block()["ceiling"]
    assert ceiling is not None and 0.9 < ceiling["eps"] < 1.0  # the digits head claiming 1: ≈ 0.98
    assert bound.epsilon < 1.0 and bound.neighbourhood == "add_remove"
    # issue 43: 500 runs per side, below blackbox.runs' default of 2000: the block says what that cost
    reduced = bound.block()["reduced"]
    assert reduced["params_key"] == "blackbox.runs" and (reduced["runs_per_side"], reduced["default_runs_per_side"]) == (500, 2000)
    assert reduced["detectable_epsilon"] == bound.block()["detectable_epsilon"]
    assert 1.0 < reduced["detectable_epsilon_default"] < reduced["detectable_epsilon"]
