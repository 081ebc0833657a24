"""The release gate fails closed, through the real DVC pipeline (a throw-away git + DVC repository).

After a verdict on a user's own trainer:

1. the newcomer's sequence — a typo in ``params.yaml`` makes the ``user_code`` stage fail (DVC deletes
   its output ``data/user_code.json`` before running it), the typo is fixed, the trainer edited (its
   noise divided by 10), nothing rerun — once printed PASS; the verdict now exits 2 naming the file and
   ``dvc repro``, and exits 0/1 again only after ``dvc repro`` recomputed what changed;
2. every file the verdict's checks read (the user-code manifest, the environment record, ``dvc.lock``,
   every ``metrics/*.json``, the plan, the report) deleted, truncated, or replaced with the version of an
   earlier run: exit 2 each time, and a fresh verdict once the file is as the run left it;
3. a trainer, a params value and a data file changed in turn: exit 2 until ``dvc repro`` ran.

Five ``dvc repro`` runs (several minutes on 2 cores), hence ``slow``; the same checks on a hand-built
pipeline with real DVC hashes run in the default suite (``tests/unit/test_gate_provenance.py``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.pipeline.conftest import make_workspace, merged_params, run

DVC = [sys.executable, "-m", "dvc"]
VERDICT = [sys.executable, "-m", "privaudit.cli", "verdict", "--plain"]
pytestmark = pytest.mark.slow

GIT_ID = ["-c", "user.name=privaudit-test", "-c", "user.email=test@example.invalid"]

TRAINER = '''"""A user trainer: class means plus Gaussian noise of scale NOISE (a toy noisy release)."""
import numpy as np

NOISE = {noise}


class NoisyMeans:
    def __init__(self, means):
        self.means = np.asarray(means, np.float64)

    def predict_proba(self, X):
        z = -((np.asarray(X, np.float64)[:, None, :] - self.means[None]) ** 2).sum(2) / 30.0
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def state_dict(self):
        return {{"means": self.means}}


def train(X, y, n_classes, seed):
    rng = np.random.default_rng(seed)
    means = np.stack([X[y == c].mean(0) if np.any(y == c) else np.zeros(X.shape[1]) for c in range(n_classes)])
    return NoisyMeans(means + rng.normal(0.0, NOISE, means.shape))


def load(state, n_classes):
    return NoisyMeans(state["means"])
'''

MINE = {"name": "mine", "kind": "python", "target": "trainers/mine.py:train", "loader": "trainers/mine.py:load",
        "order_invariant": True}
PARAMS = merged_params({
    "base": {"seed": 7, "device": "cpu"},
    "dataset": {"name": "digits", "max_samples": 300},
    "defenders": [MINE],
    "ltu": {"rounds": 60, "attackers": ["loss_gap", "score_best"], "risk_reference_models": 0},
    "game3": {"canaries": 20, "tau_steps": 3},
    "lidp": {"trials": 4, "tau_quantiles": 4},
    "blackbox": {"runs": 40, "runs_no_claim": 8, "sequential_runs": 8, "block": 40},
    "compute": {"budget_minutes": None},
})


def _verdict(ws: Path) -> tuple[int, str]:
    proc = run(VERDICT, ws, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _fresh(ws: Path) -> None:
    rc, out = _verdict(ws)
    assert rc in (0, 1), out


def _stale(ws: Path, *needles: str) -> None:
    rc, out = _verdict(ws)
    assert rc == 2, out
    assert "PASS" not in out.split("error:")[0], out
    for needle in needles:
        assert needle in out, out


def _write_params(ws: Path, params: dict) -> None:
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_the_gate_fails_closed_through_the_real_pipeline(repo_root: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo_root, tmp_path / "ws", PARAMS)
    (ws / "trainers").mkdir()
    (ws / "trainers" / "__init__.py").write_text("")
    (ws / "trainers" / "mine.py").write_text(TRAINER.format(noise=0.5))
    run(["git", "add", "-A"], ws)
    run(["git", *GIT_ID, "commit", "-q", "--no-gpg-sign", "-m", "trainer"], ws)
    run(DVC + ["repro"], ws)
    _fresh(ws)
    earlier = tmp_path / "earlier"  # the files of this first run
    shutil.copytree(ws, earlier, ignore=shutil.ignore_patterns(".dvc", ".git"))

    # 1. the newcomer's sequence
    typo = yaml.safe_load(yaml.safe_dump(PARAMS))
    typo["defenders"][0]["target"] = "trainers/mine.py:trian"
    _write_params(ws, typo)
    failed = run(DVC + ["repro"], ws, check=False)
    assert failed.returncode != 0
    assert not (ws / "data" / "user_code.json").exists()  # DVC deleted the output of the stage that failed
    _write_params(ws, PARAMS)
    (ws / "trainers" / "mine.py").write_text(TRAINER.format(noise=0.05))  # the noise divided by 10
    _stale(ws, "data/user_code.json is missing", "dvc repro")
    ran = run(DVC + ["repro"], ws).stdout
    assert "Running stage 'defenders'" in ran and "Running stage 'canaries'" in ran
    _fresh(ws)

    # 2. every file the checks read: deleted, truncated, or an earlier run's version
    files = ["dvc.lock", "data/user_code.json", "data/environment.json", "data/plan/sizes.json",
             "data/plan/checked.json", "reports/audit.html", *sorted(
                 p.relative_to(ws).as_posix() for p in (ws / "metrics").glob("*.json"))]
    assert {"metrics/gate.json", "metrics/ltu.json", "metrics/audit.json", "metrics/bounds.json",
            "metrics/summary.json"} <= set(files)
    env_earlier = yaml.safe_load((earlier / "data" / "environment.json").read_text())
    env_earlier["packages"]["opacus"] = "0.0.1"  # the first run was made before `pip install -U opacus`
    (earlier / "data" / "environment.json").write_text(yaml.safe_dump(env_earlier))
    for rel in files:
        path = ws / rel
        good = path.read_bytes()
        for damage in ("delete", "truncate", "earlier run"):
            if damage == "delete":
                path.unlink()
            elif damage == "truncate":
                path.write_bytes(good[: len(good) // 2])
            else:
                if (earlier / rel).read_bytes() == good:
                    continue  # this file did not change between the runs (e.g. the plan of the same sizes)
                shutil.copy2(earlier / rel, path)
            rc, out = _verdict(ws)
            assert rc == 2, f"{damage} {rel}: exit {rc}\n{out}"
            path.write_bytes(good)
        _fresh(ws)

    # 3. a trainer, a params value and a data file, each in turn: stale until `dvc repro`
    (ws / "trainers" / "mine.py").write_text(TRAINER.format(noise=0.2))
    _stale(ws, "user code of defender 'mine' changed (trainers/mine.py)")
    run(DVC + ["repro"], ws)
    _fresh(ws)
    changed = yaml.safe_load(yaml.safe_dump(PARAMS))
    changed["ltu"]["rounds"] = 80
    _write_params(ws, changed)
    _stale(ws, "ltu.rounds changed")
    run(DVC + ["repro"], ws)
    _fresh(ws)
    (ws / "data" / "external" / "notes.csv").write_text("a,b\n1,2\n")
    _stale(ws, "data/external changed")
    run(DVC + ["repro"], ws)
    _fresh(ws)


NAN_TRAINER = '''"""A trainer whose models trained on an odd number of rows output NaN: the release model is fine, canary runs not."""
import numpy as np


class Means:
    def __init__(self, means, broken):
        self.means, self.broken = np.asarray(means, np.float64), bool(broken)

    def predict_proba(self, X):
        z = -((np.asarray(X, np.float64)[:, None, :] - self.means[None]) ** 2).sum(2) / 30.0
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        return np.full_like(p, np.nan) if self.broken else p

    def state_dict(self):
        return {"means": self.means, "broken": np.array([float(self.broken)])}


def train(X, y, n_classes, seed):
    means = np.stack([X[y == c].mean(0) if np.any(y == c) else np.zeros(X.shape[1]) for c in range(n_classes)])
    return Means(means, len(y) % 2 == 1)


def load(state, n_classes):
    return Means(state["means"], state["broken"][0] > 0)
'''


def test_a_trainer_with_non_finite_scores_ends_not_audited(repo_root: Path, tmp_path: Path) -> None:
    """Never a traceback, never PASS: the pipeline finishes and the gate fails the defender as NOT AUDITED, naming
    the defender and each audit whose scores were unusable."""
    params = merged_params({**{k: v for k, v in PARAMS.items() if k != "defenders"},
                            "defenders": [{**MINE, "target": "trainers/mine.py:train",
                                           "claimed_epsilon": 2.0, "claimed_delta": 1e-5}]})
    ws = make_workspace(repo_root, tmp_path / "ws", params)
    (ws / "trainers").mkdir()
    (ws / "trainers" / "__init__.py").write_text("")
    (ws / "trainers" / "mine.py").write_text(NAN_TRAINER)
    run(["git", "add", "-A"], ws)
    out = run(DVC + ["repro"], ws).stdout  # every stage runs to the end
    assert "will be NOT AUDITED" in out and "Traceback" not in out
    rc, verdict = _verdict(ws)
    assert rc == 1, verdict
    lines = [line for line in verdict.splitlines() if "could not run" in line]
    assert lines and all("[NOT AUDITED]" in line and "defender 'mine'" in line for line in lines), verdict
    assert any("the blackbox audit could not run" in line for line in lines), verdict
