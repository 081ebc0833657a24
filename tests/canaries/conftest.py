"""Small feature sets and params for the canary-experiment tests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from privaudit.canaries.plan import CanaryPlan
from privaudit.config import parse_params
from privaudit.features.feature_set import FeatureSet


def digits_features(n: int | None = None, seed: int = 0) -> FeatureSet:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))[: n or len(y)]
    X, y = (X[idx] / 16.0).astype(np.float32), y[idx].astype(np.int64)
    is_def = np.zeros(len(y), dtype=bool)
    is_def[: len(y) // 2] = True
    return FeatureSet(X=X, y=y, ids=np.array([f"s{i}" for i in idx]), is_defender=is_def, n_classes=10)


def make_params(defenders: list[dict], **blocks: dict) -> CanaryPlan:
    """The canary plan of a small params set (``blocks`` merged into the defaults below)."""
    raw = {"base": {"seed": 11, "device": "cpu"}, "defenders": defenders,
           "game3": {"canaries": 30, "tau_steps": 4}, "lidp": {"trials": 8, "tau_quantiles": 4},
           "compute": {"block_trials": 4, "shard_trials": 4, "n_jobs": 1},
           "blackbox": {"runs": 8, "runs_no_claim": 8, "sequential_runs": 8, "block": 8}}
    for k, v in blocks.items():
        raw[k] = {**raw.get(k, {}), **v}
    return CanaryPlan.of(parse_params(raw))


@pytest.fixture(scope="session")
def small_fs() -> FeatureSet:
    return digits_features(400)


MLP = {"name": "mlp", "kind": "torch_mlp", "hidden": [8], "epochs": 2, "batch_size": 32}
DP = {"name": "dp", "kind": "dp_sgd", "epsilon": 1.0, "epochs": 2}
LOGREG = {"name": "logreg", "kind": "logistic_regression"}


@pytest.fixture(autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    """Small batched heads run fastest on one thread (as the canaries stage runs them)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
