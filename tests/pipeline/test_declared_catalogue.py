"""Issue 33, end to end: honest DP trainers of several kinds as ``kind: python`` defenders through the whole
DVC pipeline, on a binary table and on 10-class digits. No honest claim is refuted by a gated bound; a
pure claim (``claimed_delta: 0``) is accepted and audited, with its mechanism declared and without.

The trainers are ``examples/noisy_sums_trainer.py``: Laplace output perturbation (pure ε-DP), Gaussian
output perturbation ((ε, δ)-DP, declared ``gaussian``) and label randomized response (ε-label-DP,
declared ``randomized_response``); a plain numpy DP-SGD loop (:data:`NUMPY_DPSGD`, declared
``subsampled_gaussian`` with its σ, q, T); privaudit's own ``dp_sgd`` and ``pate`` with their automatic
declarations (subsampled Gaussian, μ-GDP).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer

from tests.pipeline.conftest import make_workspace, merged_params, run

pytestmark = pytest.mark.slow  # several minutes on 2 cores: four trainers x 2 x 120 black-box fits, every stage

TARGET = "examples/noisy_sums_trainer.py:train"

#: a plain numpy DP-SGD loop of a linear softmax head (Poisson sampling, per-example clipping at 1, Gaussian
#: noise σ): the subsampled Gaussian mechanism with (σ, q = batch/n, T = epochs · round(n / batch))
NUMPY_DPSGD = '''import numpy as np


def train(X, y, n_classes, seed, sigma=1.0, batch=32, epochs=3, lr=0.5):
    rng = np.random.default_rng(seed)
    n, d = X.shape
    W = np.zeros((n_classes, d))
    q, steps = batch / n, epochs * max(1, round(n / batch))
    onehot = np.eye(n_classes)[y]
    for _ in range(steps):
        idx = np.flatnonzero(rng.random(n) < q)
        z = X[idx] @ W.T
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot[idx])[:, :, None] * X[idx][:, None, :]  # per-example gradients (b, C, d)
        norms = np.sqrt((g ** 2).sum(axis=(1, 2)))
        g /= np.maximum(norms / 1.0, 1.0)[:, None, None]
        W -= lr * (g.sum(axis=0) + rng.normal(0.0, sigma, W.shape)) / batch
    return Linear(W)


class Linear:
    def __init__(self, W):
        self.W = W

    def predict_proba(self, X):
        z = X @ self.W.T
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def state_dict(self):
        return {"W": self.W}


def load(state, n_classes, **options):
    return Linear(state["W"])
'''
LOADER = "examples/noisy_sums_trainer.py:load"


def _defenders(n_classes: int, n_train: int) -> list[dict]:
    from opacus.accountants.utils import get_noise_multiplier

    from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma

    base = {"kind": "python", "target": TARGET, "loader": LOADER}
    q, steps = 32 / n_train, 3 * max(1, round(n_train / 32))
    sigma = float(get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=q, steps=steps,
                                       accountant="prv"))
    return [
        {"name": "numpy_dpsgd", "kind": "python", "target": "numpy_dpsgd.py:train", "loader": "numpy_dpsgd.py:load",
         "options": {"sigma": sigma}, "claimed_epsilon": 2.0, "claimed_delta": 1e-5,
         "mechanism": {"kind": "subsampled_gaussian", "noise_multiplier": sigma, "sample_rate": q, "steps": steps}},
        {"name": "pate", "kind": "pate", "epsilon": 2.0, "teachers": 10},
        {**base, "name": "laplace_declared", "options": {"noise": "laplace", "epsilon": 1.0},
         "claimed_epsilon": 1.0, "claimed_delta": 0, "mechanism": {"kind": "laplace", "scale": 1.0}},
        {**base, "name": "laplace_bare", "options": {"noise": "laplace", "epsilon": 2.0},
         "claimed_epsilon": 2.0, "claimed_delta": 0},
        {**base, "name": "gaussian_declared", "options": {"noise": "gaussian", "epsilon": 2.0, "delta": 1e-5},
         "claimed_epsilon": 2.0, "claimed_delta": 1e-5,
         "mechanism": {"kind": "gaussian", "noise_multiplier": gaussian_mechanism_sigma(2.0, 1e-5, sensitivity=1.0)}},
        {**base, "name": "label_rr", "options": {"noise": "label_rr", "epsilon": 1.0},
         "claimed_epsilon": 1.0, "claimed_delta": 0, "claimed_neighbourhood": "replace_label",
         "mechanism": {"kind": "randomized_response", "epsilon": 1.0, "classes": n_classes}},
        {"name": "dpsgd", "kind": "dp_sgd", "epsilon": 2.0, "epochs": 3, "batch_size": 64},
    ]


def _binary_csv(path: Path) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    frame = pd.DataFrame(X / X.max(axis=0), columns=[f"f{i}" for i in range(X.shape[1])])
    frame["label"] = y
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


CASES = {  # dataset, classes, Defender rows (the split's half)
    "binary": ({"name": "csv", "path": "data/external/binary.csv", "label_column": "label", "max_samples": None}, 2,
               284),
    "digits": ({"name": "digits", "max_samples": 800}, 10, 400),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_honest_catalogue_is_not_refuted_end_to_end(case: str, repo_root: Path, tmp_path: Path) -> None:
    dataset, n_classes, n_train = CASES[case]
    params = merged_params({
        "base": {"seed": 11, "device": "cpu"}, "dataset": dataset, "defenders": _defenders(n_classes, n_train),
        "ltu": {"rounds": 100}, "game3": {"canaries": "auto", "tau_steps": 4}, "lidp": {"trials": 6, "tau_quantiles": 4},
        "blackbox": {"runs": 200, "runs_no_claim": 20, "sequential_runs": 120, "block": 200},
        "report": {"table1": None},
    })
    ws = make_workspace(repo_root, tmp_path / "ws", params)
    shutil.copytree(repo_root / "examples", ws / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    if case == "binary":
        _binary_csv(ws / "data" / "external" / "binary.csv")
    (ws / "numpy_dpsgd.py").write_text(NUMPY_DPSGD)
    run(["git", "add", "examples", "numpy_dpsgd.py"], ws)  # the user_code stage refuses trainer files git does not track
    run([sys.executable, "-m", "dvc", "repro"], ws)
    audit = json.loads((ws / "metrics" / "audit.json").read_text())
    gate = json.loads((ws / "metrics" / "gate.json").read_text())
    expected_curve = {"laplace_declared": "laplace", "laplace_bare": "eps_delta", "gaussian_declared": "gaussian",
                      "dpsgd": "subsampled_gaussian", "numpy_dpsgd": "subsampled_gaussian", "pate": "gaussian",
                      "label_rr": "eps_delta"}  # label-DP: no add/remove claim
    for name, curve in expected_curve.items():
        entry = audit[name]
        assert entry["violations"] == [], (name, entry["violations"])
        assert entry["blackbox"]["curve"] == curve, (name, entry["blackbox"]["curve"])
        assert not any("blackbox" in r or "one_run" in r for r in gate["defenders"][name]["reasons"]), gate
    assert audit["laplace_declared"]["claimed_delta"] == 0.0
    assert audit["laplace_declared"]["claimed_mechanism"] == {"kind": "laplace", "scale": 1.0}
    assert audit["laplace_declared"]["blackbox"]["refutes_claimed_curve"] is False
    assert audit["label_rr"]["claimed_mechanism"]["kind"] == "randomized_response"
    for name in expected_curve:
        assert np.isfinite(audit[name]["blackbox"]["eps_lower_bound"])
    assert (ws / "reports" / "plots" / "tradeoff.png").is_file()
