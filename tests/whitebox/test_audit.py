"""whitebox_audit end to end: the planted-bug catalogue, dp_sgd, the no-watch error, false alarms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import load_digits

from privaudit import hooks
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.stats.whitebox import whitebox_bounds
from privaudit.audits.whitebox import defender_trainer, python_trainer, whitebox_audit

from privaudit.testing.planted.opacus_bugs import BUGS, CORRECT, recipe, tiny_data

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook")

ACC = "gdp"  # the catalogue claims and audits with opacus's fastest accountant here (benchmarks use 'prv')
N_CLASSES = 3


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return tiny_data()  # 200 × 8, 3 classes


@pytest.mark.parametrize("name", sorted(BUGS))
def test_every_planted_bug_is_caught(name: str, data) -> None:
    X, y = data
    bug = BUGS[name]
    res = whitebox_audit(python_trainer(bug.train, N_CLASSES, accountant=ACC), X, y, runs=1, level=0.05, accountant=ACC,
                         seed=1)
    claim = 1.0
    assert res.overclaims(claim), (name, res.epsilon, res.failed_checks)
    if bug.caught_by == "epsilon":
        assert res.epsilon > claim
    else:
        assert bug.caught_by in res.failed_checks and res.reasons
    # ε̂ is a lower bound on the TRUE ε of what the buggy code runs; the GDP accountant the recipe was
    # calibrated with is a CLT approximation that can fall below the true ε, so the reference here
    # is the PRV accountant's upper end on the same mechanism (σ, q, T as implemented)
    true = bug.true_epsilon(len(X), accountant=ACC, true_by="prv")
    if isinstance(true, float):
        assert res.epsilon <= true  # a lower bound on what the buggy code really spends


def test_correct_recipe_passes(data) -> None:
    X, y = data
    claim = CORRECT.true_epsilon(len(X), accountant=ACC)
    for seed in (1, 2):
        res = whitebox_audit(python_trainer(CORRECT.train, N_CLASSES, accountant=ACC), X, y, runs=1, accountant=ACC,
                             seed=seed, level=0.05)
        assert not res.overclaims(claim) and res.checks_passed
        assert 0.75 * claim < res.epsilon <= claim
        assert res.sensitivity == pytest.approx(1.0, rel=1e-5) and res.dataset_size == len(X)


def test_false_alarms_of_the_correct_recipe_30_audits(data) -> None:
    """30 recorded runs of the correct recipe: flagged (a check fails, or z_U < σ or q_L > q — a
    superset of ε̂ > ε) at most at the level plus binomial noise (200+ full audits: benchmarks)."""
    X, y = data
    r = recipe(len(X), accountant=ACC)
    flagged = 0
    for i in range(30):
        with hooks.recording(seed=1000 + i) as rec:
            CORRECT.train(X, y, N_CLASSES, 5000 + i, accountant=ACC)
        b = whitebox_bounds([rec.observations()], dataset_size=len(X), level=0.05)
        z_upper = b.noise_std_upper / b.sensitivity
        flagged += (not all(c.passed for c in b.checks)) or z_upper < r["sigma"] or b.sample_rate_lower > r["q"]
    assert flagged <= stats.binom.ppf(0.999, 30, 0.05)


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))[:300]
    X = X[idx]
    return ((X - X.mean(0)) / (X.std(0) + 1e-9)).astype(np.float32), y[idx]


def test_dp_sgd_defender_audit_is_tight(digits) -> None:
    X, y = digits
    spec = validate_defender_spec({"name": "dp", "kind": "dp_sgd", "epsilon": 2.0, "epochs": 4, "batch_size": 32},
                                  where="defenders[0]")
    claim = make_defender(spec, 10).fit(X, y, seed=0).claimed_epsilon()
    res = whitebox_audit(defender_trainer(lambda: make_defender(spec, 10)), X, y, runs=1, seed=3, level=0.05)
    assert res.checks_passed and res.accountant == "prv"
    assert 0.8 * claim <= res.epsilon <= claim
    assert res.steps == 4 * round(300 / 32) and res.dimension == 64 * 10 + 10


def test_trainer_without_watch_is_named(data) -> None:
    X, y = data

    def train_without_watch(X, y, n_classes, seed):
        return None

    with pytest.raises(hooks.WatchNotCalledError, match=r"train_without_watch.*privaudit\.hooks\.watch"):
        whitebox_audit(python_trainer(train_without_watch, N_CLASSES), X, y, runs=1, level=0.05)
    with pytest.raises(ValueError, match="privaudit.hooks.watch"):  # it is a ValueError
        whitebox_audit(lambda X, y, seed: None, X, y, runs=1, level=0.05)


def test_true_dataset_size_is_used_and_a_wrong_declaration_noted(data, monkeypatch) -> None:
    X, y = data
    real_watch = hooks.watch
    monkeypatch.setattr(hooks, "watch", lambda opt, *, dataset_size: real_watch(opt, dataset_size=10 * dataset_size))
    res = whitebox_audit(python_trainer(CORRECT.train, N_CLASSES, accountant=ACC), X, y, runs=1, level=0.05,
                         accountant=ACC)
    assert res.dataset_size == len(X) and res.sample_rate_point == pytest.approx(0.1, rel=0.2)
    assert any("declared dataset_size=[2000]" in note for note in res.notes)


def test_runs_are_pooled(data) -> None:
    X, y = data
    res = whitebox_audit(python_trainer(CORRECT.train, N_CLASSES, accountant=ACC), X, y, runs=2, level=0.05,
                         accountant=ACC)
    assert (res.runs, res.steps, res.total_steps) == (2, 50, 100)


def test_argument_errors_name_the_argument(data) -> None:
    X, y = data
    fit = python_trainer(CORRECT.train, N_CLASSES)
    for kwargs, word in (({"runs": 0}, "runs"), ({"delta": 1.5}, "delta"), ({"level": 0.0}, "level"),
                         ({"accountant": "moments"}, "accountant"), ({"canary_scale": 1.0}, "canary_scale"),
                         ({"seed": -1}, "seed")):
        with pytest.raises(ValueError, match=word):
            whitebox_audit(fit, X, y, **{"level": 0.05, **kwargs})
    with pytest.raises(ValueError, match="y must have shape"):
        whitebox_audit(fit, X, y[:-1], level=0.05)
    with pytest.raises(ValueError, match="X must be"):
        whitebox_audit(fit, X[0], y, level=0.05)
    assert not math.isnan(recipe(len(X))["sigma"])


_ON_WORKERS = """
import dataclasses, json, os, sys
from privaudit.audits.whitebox import python_trainer, whitebox_audit
from privaudit.repro.worker_pool import fork_refusal
from privaudit.testing.planted.opacus_bugs import CORRECT, tiny_data

def recording(path):  # the correct recipe, noting which process ran each fit
    def train(X, y, n_classes, seed, **kw):
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        return CORRECT.train(X, y, n_classes, seed, **kw)
    return python_trainer(train, 3, accountant="gdp")

X, y = tiny_data()
here, away = sys.argv[1] + "/here", sys.argv[1] + "/away"
refusal = fork_refusal()
one = whitebox_audit(recording(here), X, y, runs=3, level=0.05, accountant="gdp", seed=4)
two = whitebox_audit(recording(away), X, y, runs=3, level=0.05, accountant="gdp", seed=4, workers=2)
print(json.dumps({"same": dataclasses.asdict(one) == dataclasses.asdict(two), "runs": two.runs,
                  "total_steps": two.total_steps, "passed": two.checks_passed, "refusal": refusal,
                  "own": str(os.getpid()), "here": sorted(set(open(here).read().split())),
                  "away": sorted(set(open(away).read().split()))}))
"""


def test_runs_on_worker_processes_give_the_bits_of_runs_here(tmp_path) -> None:
    """``workers``: the audit runs go to forked processes (each on one torch and one BLAS thread, as here) and come
    back in run order: the same result, field for field, as the runs one after the other in this process. In a
    fresh one-thread process (pytest-xdist's workers run threads, where a fork is refused and the runs stay here)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    if not sys.platform.startswith("linux"):
        pytest.skip("forked workers: Linux only")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", _ON_WORKERS, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["refusal"] is None, out["refusal"]  # a fresh process may fork: the worker path is what is tested
    assert out["same"] and (out["runs"], out["total_steps"]) == (3, 150) and out["passed"]
    assert out["here"] == [out["own"]]
    assert out["away"] and out["own"] not in out["away"]  # every run in a worker (one may have taken all three)


def test_a_run_on_a_worker_that_never_watched_is_named_in_run_order(data) -> None:
    X, y = data

    def train_without_watch(X, y, n_classes, seed):  # noqa: ANN001, ANN202
        return None

    with pytest.raises(hooks.WatchNotCalledError, match=r"train_without_watch.*audit run 0"):
        whitebox_audit(python_trainer(train_without_watch, N_CLASSES), X, y, runs=2, level=0.05, workers=2)
    with pytest.raises(ValueError, match="workers"):
        whitebox_audit(python_trainer(CORRECT.train, N_CLASSES), X, y, level=0.05, workers=0)


def test_audit_inputs_refuse_a_bad_worker_count() -> None:
    from privaudit.audits.protocol import AuditInputs

    assert AuditInputs().workers == 1
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="compute.n_jobs"):
            AuditInputs(workers=bad)
