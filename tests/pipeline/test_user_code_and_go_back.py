"""Issue 28 items 1–3 through the real DVC pipeline in a throw-away git repository.

1. An untracked ``kind: python`` trainer stops the ``user_code`` stage (``dvc exp run`` would leave
   it out of the experiment), naming the file and ``git add``.
2. Editing a local module the trainer imports makes ``privaudit verdict`` refuse the gate (naming
   the file); ``dvc repro`` then reruns the canaries stage without reusing any shard of the user's
   defender, and its outcomes change.
3. Going back to the earlier audit with the README's recipe works where the report is not in the
   clone's DVC cache (a fresh clone's cache holds only what ran there; the committed report was
   built elsewhere): the old recipe's ``dvc checkout`` fails and deletes the report, and the verdict
   then refuses (exit 2) instead of printing the old PASS; the new recipe rebuilds only the report
   and gives back the committed metrics byte for byte.

Several minutes on 2 shared cores (one full repro, one repro from the defenders on, one report),
hence ``slow``.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.pipeline.conftest import make_workspace, merged_params, run

pytestmark = pytest.mark.slow

DVC = [sys.executable, "-m", "dvc"]
VERDICT = [sys.executable, "-m", "privaudit.cli", "verdict", "--plain"]
GIT_ID = ["-c", "user.name=privaudit-test", "-c", "user.email=test@example.invalid"]

SETTINGS = "TEMPERATURE = {t}\n"
TRAINER = '''"""A user trainer split over two files: the recipe's constant lives in trainers/settings.py."""
import numpy as np

from trainers.settings import TEMPERATURE


class NearestMean:
    def __init__(self, means, temperature):
        self.means, self.temperature = np.asarray(means, np.float64), float(temperature)

    def predict_proba(self, X):
        z = -((np.asarray(X, np.float64)[:, None, :] - self.means[None]) ** 2).sum(2) / self.temperature
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def state_dict(self):
        return {"means": self.means, "temperature": np.array([self.temperature])}


def train(X, y, n_classes, seed):
    means = np.stack([X[y == c].mean(0) if np.any(y == c) else np.zeros(X.shape[1]) for c in range(n_classes)])
    return NearestMean(means, TEMPERATURE)


def load(state, n_classes):
    return NearestMean(state["means"], float(state["temperature"][0]))
'''

PARAMS = merged_params({
    "base": {"seed": 7, "device": "cpu"},
    "dataset": {"name": "digits", "max_samples": 400},
    "defenders": [
        {"name": "logreg", "kind": "logistic_regression"},
        {"name": "mine", "kind": "python", "target": "trainers/mine.py:train", "loader": "trainers/mine.py:load",
         "deterministic": True, "order_invariant": True},
    ],
    "canaries": {"defenders": ["mine"]},
    "ltu": {"rounds": 100},
    "game3": {"canaries": 30, "tau_steps": 4},
    "lidp": {"trials": 4, "tau_quantiles": 4},
    "blackbox": {"runs": 40, "runs_no_claim": 20, "sequential_runs": 8, "block": 40},
})


def _commit(ws: Path, message: str) -> str:
    run(["git", "add", "-A"], ws)
    run(["git", *GIT_ID, "commit", "-q", "--no-gpg-sign", "-m", message], ws)
    return run(["git", "rev-parse", "HEAD"], ws).stdout.strip()


def _canary_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if re.match(r"canaries: \d+ of \d+ shards", line))


def _drop_from_cache(ws: Path, lock_text: str, stage: str) -> None:
    """Remove ``stage``'s outputs in ``lock_text`` from the DVC cache (and the run cache): a clone that never built them."""
    lock = yaml.safe_load(lock_text)
    for out in lock["stages"][stage]["outs"]:
        md5 = out["md5"]
        obj = ws / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
        if obj.is_file():
            obj.unlink()
    shutil.rmtree(ws / ".dvc" / "cache" / "runs", ignore_errors=True)


def test_user_code_is_tracked_hashed_and_an_audit_can_be_gone_back_to(repo_root: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo_root, tmp_path / "ws", PARAMS)
    (ws / "trainers").mkdir()
    (ws / "trainers" / "__init__.py").write_text("")
    (ws / "trainers" / "mine.py").write_text(TRAINER)
    (ws / "trainers" / "settings.py").write_text(SETTINGS.format(t=30.0))

    # item 3: untracked user code stops the pipeline at its first stage, with the fix
    first = run(DVC + ["repro"], ws, check=False)
    assert first.returncode != 0
    assert "not tracked by git" in first.stderr and "`git add trainers/__init__.py trainers/mine.py " \
        "trainers/settings.py`" in first.stderr, first.stderr
    assert not (ws / "data" / "defenders").exists()

    _commit(ws, "trainer")
    run(DVC + ["repro"], ws)
    before = {n: np.load(ws / "data" / "canaries" / "mine" / n) for n in ("game3.npz", "lidp.npz")}
    committed = _commit(ws, "audit 1")
    verdict = run(VERDICT, ws, check=False)
    assert verdict.returncode in (0, 1), verdict.stderr
    metrics_1 = {p.name: p.read_bytes() for p in (ws / "metrics").glob("*.json")}

    # item 1: an edit one import away from the trainer is stale, then recomputed, never reused
    (ws / "trainers" / "settings.py").write_text(SETTINGS.format(t=90.0))
    stale = run(VERDICT, ws, check=False)
    assert stale.returncode == 2, stale.stdout
    assert "user code of defender 'mine' changed (trainers/settings.py)" in stale.stderr and "dvc repro" in stale.stderr
    again = run(DVC + ["repro"], ws)
    line = _canary_line(again.stdout)
    assert line.startswith("canaries: 0 of "), line  # not "N of N already finished; running 0"
    after = {n: np.load(ws / "data" / "canaries" / "mine" / n) for n in ("game3.npz", "lidp.npz")}
    changed = [f"{n}:{k}" for n in before for k in before[n].files
               if before[n][k].dtype.kind == "f" and not np.array_equal(before[n][k], after[n][k])]
    assert any(c.startswith("game3") for c in changed) and any(c.startswith("lidp") for c in changed), changed
    assert run(VERDICT, ws, check=False).returncode in (0, 1)
    _commit(ws, "audit 2")
    metrics_2 = {p.name: p.read_bytes() for p in (ws / "metrics").glob("*.json")}

    # item 2, README recipe 1: drop an experiment, back to the committed audit, whose report this cache
    # lacks (a fresh clone's cache holds only what ran there; the committed report was built elsewhere)
    _drop_from_cache(ws, (ws / "dvc.lock").read_text(), "report")
    run(DVC + ["exp", "run", "-S", "report.title=an experiment"], ws)
    run(["git", "checkout", "HEAD", "--", "params.yaml", "dvc.lock", "metrics"], ws)
    run(DVC + ["checkout", "--allow-missing"], ws)
    rebuilt = run(DVC + ["repro"], ws)
    assert sorted(re.findall(r"Running stage '(\w+)'", rebuilt.stdout)) == ["environment", "history", "report",
                                                                                  "user_code"], \
        rebuilt.stdout
    assert run(VERDICT, ws, check=False).returncode in (0, 1)
    assert {p.name: p.read_bytes() for p in (ws / "metrics").glob("*.json")} == metrics_2
    changed = run(["git", "diff", "--name-only"], ws).stdout.split()
    assert not any(c.startswith("metrics/") for c in changed), changed
    if run(["git", "status", "--porcelain"], ws).stdout.strip():
        _commit(ws, "the report rebuilt in this clone")  # its entry in dvc.lock, if the bytes differ

    # item 2, README recipe 2: an earlier commit, whose report this cache lacks too; the old recipe first
    _drop_from_cache(ws, run(["git", "show", f"{committed}:dvc.lock"], ws).stdout, "report")
    run(["git", "checkout", "-q", committed], ws)
    failed = run(DVC + ["checkout"], ws, check=False)  # the old recipe
    assert failed.returncode != 0 and "reports/audit.html" in failed.stderr, failed.stderr
    refused = run(VERDICT, ws, check=False)
    assert refused.returncode == 2 and "reports/audit.html is missing" in refused.stderr, refused.stdout

    # the README's recipe: restore what the cache holds, rebuild the rest
    run(DVC + ["checkout", "--allow-missing"], ws)
    rebuilt = run(DVC + ["repro"], ws)
    ran = re.findall(r"Running stage '(\w+)'", rebuilt.stdout)
    # only what the cache could not give back (and the three always_changed stages)
    assert sorted(ran) == ["environment", "history", "report", "user_code"], rebuilt.stdout
    verdict = run(VERDICT, ws, check=False)
    assert verdict.returncode in (0, 1), verdict.stderr
    assert {p.name: p.read_bytes() for p in (ws / "metrics").glob("*.json")} == metrics_1
