"""Issue 28 item 1: canary shards of a ``kind: python`` defender are keyed on its code.

Reported: after one line of the user's trainer changed, the canaries stage said ``4 of 4 shards
already finished; running 0`` and reused the old trainer's Game-3/LiDP outcomes. Here the trainer's
behaviour is edited in the file, and in a local module it imports, and the shards must be recomputed
with outcomes that change.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from privaudit.canaries.plan import CanaryPlan
from privaudit.canaries.shards import load_shard, missing_shards, plan_shards, run_missing_shards, shard_dir
from privaudit.config import parse_params

TRAINER = '''import numpy as np
from {helper} import TEMPERATURE


class NearestMean:
    def __init__(self, means, temperature):
        self.means, self.temperature = means, temperature

    def predict_proba(self, X):
        z = -((np.asarray(X, np.float64)[:, None, :] - self.means[None]) ** 2).sum(2) / self.temperature
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def state_dict(self):
        return {{"means": self.means}}


def train(X, y, n_classes, seed):
    means = np.stack([X[y == c].mean(0) if np.any(y == c) else np.zeros(X.shape[1]) for c in range(n_classes)])
    return NearestMean(means, TEMPERATURE * {scale})
'''


def _plan(root: Path) -> CanaryPlan:
    raw = {"base": {"seed": 11, "device": "cpu"},
           "defenders": [{"name": "mine", "kind": "python", "target": f"{root / 'trainer.py'}:train",
                          "deterministic": True, "order_invariant": True}],
           "game3": {"canaries": 30, "tau_steps": 4}, "lidp": {"trials": 4, "tau_quantiles": 4},
           # one process: the test edits the trainer between runs in this process, and joblib's reusable
           # worker processes would keep the module they imported first (a stage runs once per process)
           "compute": {"block_trials": 2, "shard_trials": 2, "n_jobs": 1},
           "blackbox": {"sequential_runs": 8}}
    return CanaryPlan.of(parse_params(raw), root=root)


def _forget_user_modules(helper: str) -> None:
    """What a new stage process sees: the user's modules imported afresh."""
    for name in [n for n in sys.modules if n.startswith("privaudit_user_trainer") or n == helper]:
        del sys.modules[name]


def _outcomes(root: Path, plan: CanaryPlan) -> dict[str, np.ndarray]:
    shards = plan_shards(plan)
    return {f"{s.experiment}-{s.start}-{k}": v for s in shards for k, v in load_shard(root, plan, s).items()}


def test_edited_trainer_or_helper_reruns_its_shards(tmp_path: Path, small_fs, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = f"helper_{uuid.uuid4().hex[:8]}"
    code, store = tmp_path / "code", tmp_path / "shards"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))  # the stages import from the repository root
    (code / "trainer.py").write_text(TRAINER.format(helper=helper, scale="1.0"))
    (code / f"{helper}.py").write_text("TEMPERATURE = 30.0\n")

    runs = []
    for edit in (None, ("trainer.py", TRAINER.format(helper=helper, scale="0.5")),
                 (f"{helper}.py", "TEMPERATURE = 90.0\n")):
        if edit is not None:
            (code / edit[0]).write_text(edit[1])
            _forget_user_modules(helper)
        plan = _plan(code)
        todo = missing_shards(store, plan, small_fs)
        assert todo == plan_shards(plan), "a changed trainer reused shards of the old one"
        run_missing_shards(store, plan, small_fs, todo, "cpu")
        assert missing_shards(store, plan, small_fs) == []  # unchanged code: everything reused
        runs.append(_outcomes(store, plan))
    assert len({shard_dir(store, _plan(code))}) == 1  # same params and library: one key directory
    for before, after in zip(runs, runs[1:]):
        assert before.keys() == after.keys()
        changed = [k for k in before if before[k].dtype.kind == "f" and not np.array_equal(before[k], after[k])]
        assert any(k.startswith("game3") for k in changed) and any(k.startswith("lidp") for k in changed)
        assert any(k.startswith("blackbox") and k.endswith("-score") for k in changed)  # the many-run audit's scores
