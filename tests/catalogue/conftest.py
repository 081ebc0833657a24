"""Bad-input catalogue: a tiny workspace whose earlier-stage outputs are prepared once per worker.

Each case copies the prepared workspace, breaks one thing, runs the REAL stage CLI
(``python -m stages.<x>`` in a subprocess) and checks, through :func:`expect_failure`:
exit code 1 (an expected error, no traceback), a message naming the stage and the problem,
no output written and every earlier output byte-for-byte untouched.

The stage processes run on one warm stage server per test worker (:mod:`privaudit.repro.warm`, as ``make audit``
runs its stages: the same stage code, forked from a process that has imported the heavy libraries once), so
a case pays its stage's work, not its imports (the catalogue ran 99 s alone on 2 cores cold, 41 s so);
``test_stage_inputs.py`` runs one case cold as well, which must give the same message.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

N_PER_CLASS, N_FEATURES, N_CLASSES = 24, 6, 3
BASE_PARAMS = {
    "base": {"seed": 3, "device": "cpu"},
    "dataset": {"name": "csv", "path": "raw/table.csv", "label_column": "label"},
    "split": {"defender_fraction": 0.5},
    "featurize": {"backbone": "identity"},
    "defenders": [
        {"name": "logreg", "kind": "logistic_regression"},
        {"name": "mlp", "kind": "torch_mlp", "hidden": [8], "epochs": 2, "batch_size": 16},
    ],
    "ltu": {"rounds": 20, "attackers": ["loss_gap"]},
    "game3": {"canaries": 8, "tau_steps": 2},
    "lidp": {"trials": 2, "tau_quantiles": 2},
}
PREPARED_STAGES = ("ingest", "split", "featurize", "defenders")


def table_rows(rng: np.random.Generator) -> list[list[object]]:
    """``N_CLASSES * N_PER_CLASS`` rows: class-dependent Gaussian features, label last."""
    rows = []
    for c in range(N_CLASSES):
        for x in rng.normal(loc=c, scale=1.0, size=(N_PER_CLASS, N_FEATURES)):
            rows.append([f"{v:.4f}" for v in x] + [f"class{c}"])
    return rows


def write_table(path: Path, rows: list[list[object]]) -> None:
    header = [f"f{i}" for i in range(N_FEATURES)] + ["label"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n")


def write_params(ws: Path, **overrides: object) -> dict:
    """Write ``ws/params.yaml`` = BASE_PARAMS with top-level blocks replaced/merged by ``overrides``."""
    params = yaml.safe_load(yaml.safe_dump(BASE_PARAMS))
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(params.get(key), dict):
            params[key].update(value)
        else:
            params[key] = value
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


@dataclass(frozen=True)
class WarmServer:
    """This test worker's warm stage server: the environment that points a stage at it, and its log (a JSON line
    per stage run it served, :func:`privaudit.repro.warm.session.warm_stages`)."""

    env: dict[str, str]
    log: Path


#: set by :func:`warm_server` for the session
_server: WarmServer | None = None


@pytest.fixture(scope="session", autouse=True)
def warm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmServer]:
    """One warm stage server for this test worker's catalogue cases (stopped at the end of the session)."""
    from privaudit.repro.warm.protocol import SOCKET_ENV
    from privaudit.repro.warm.session import warm_stages

    global _server
    log = tmp_path_factory.mktemp("catalogue-warm") / "runs.jsonl"
    with warm_stages(env=dict(os.environ), log=log) as env:
        _server = WarmServer({SOCKET_ENV: env[SOCKET_ENV]}, log)
        try:
            yield _server
        finally:
            _server = None


def warm_runs() -> list[str]:
    """The stage modules this worker's warm server has run so far, in order."""
    if _server is None or not _server.log.exists():
        return []
    return [json.loads(line)["module"] for line in _server.log.read_text().splitlines() if line.strip()]


def stage_env(ws: Path, cold: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a case's stage process: on this worker's warm stage server unless ``cold``."""
    env = dict(os.environ)
    env.update(DO_NOT_TRACK="1", GX_ANALYTICS_ENABLED="False", CI="1",
               PRIVAUDIT_VALIDATION_DOCS=str(ws / "reports" / "validation"), **extra)
    if not cold and _server is not None:
        env.update(_server.env)
    return env


def snapshot(ws: Path) -> dict[str, str]:
    """Relative path → sha256 of every file in ``ws`` but ``reports/`` and ``stages``.

    Directories count only through their files: ``ensure_writable`` may create an empty
    parent folder (e.g. ``metrics/``) before failing, which is not an output. Left-over
    temporary folders of ``atomic_dir`` are caught separately by :func:`stray_temporaries`.
    """
    out = {}
    for p in sorted(ws.rglob("*")):
        rel = p.relative_to(ws)
        if rel.parts[0] in ("reports", "stages") or p.is_dir():
            continue
        out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def stray_temporaries(ws: Path) -> list[str]:
    """Temporary/old siblings left by an interrupted atomic write (``.<name>.tmp-*``, ``.<name>.old-*``)."""
    return [str(p.relative_to(ws)) for p in ws.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]


def expect_failure(ws: Path, stage: str, *needles: str, args: tuple[str, ...] = (), absent: tuple[str, ...] = (),
                   env: dict[str, str] | None = None) -> str:
    """Run ``python -m stages.<stage>`` in ``ws``; assert the catalogue contract; return stderr.

    ``needles`` must all appear (case-insensitive) in the message; ``absent`` paths (relative
    to ``ws``) must not exist afterwards (the stage's own outputs).
    """
    before = snapshot(ws)
    proc = subprocess.run([sys.executable, "-m", f"stages.{stage}", "--params", "params.yaml", *args],
                          cwd=ws, env=env or stage_env(ws), capture_output=True, text=True, timeout=300)
    err = proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stdout}\n{err}"
    assert "Traceback" not in err, err
    assert f"stage {stage} failed" in err, err
    for needle in needles:
        assert needle.lower() in err.lower(), f"{needle!r} not in message:\n{err}"
    assert snapshot(ws) == before, "the failed stage changed files in the workspace"
    assert not stray_temporaries(ws), stray_temporaries(ws)
    for rel in absent:
        assert not (ws / rel).exists(), f"{rel} was written by a failed stage"
    log = os.environ.get("CATALOGUE_MESSAGES")  # collect the messages for the README/closing note
    if log:
        with open(log, "a") as fh:
            fh.write(f"## {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\n{err.strip()}\n\n")
    return err


def _prepare(ws: Path, repo_root: Path) -> None:
    """Run ingest, split, featurize, defenders on the tiny table, in-process, into ``ws``."""
    ws.mkdir(parents=True)
    write_table(ws / "raw" / "table.csv", table_rows(np.random.default_rng(0)))
    write_params(ws)
    (ws / "stages").symlink_to(repo_root / "stages", target_is_directory=True)
    old_env, old_cwd = os.environ.get("PRIVAUDIT_VALIDATION_DOCS"), Path.cwd()
    os.environ["PRIVAUDIT_VALIDATION_DOCS"] = "off"
    os.chdir(ws)
    try:
        from stages._runner import run_stage

        for name in PREPARED_STAGES:
            mod = importlib.import_module(f"stages.{name}")
            code = run_stage(name, mod._args, mod._body, argv=["--params", "params.yaml"])
            assert code == 0, f"preparing stage {name} failed"
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("PRIVAUDIT_VALIDATION_DOCS", None)
        else:
            os.environ["PRIVAUDIT_VALIDATION_DOCS"] = old_env


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    """A workspace with data/source, data/split, data/features, data/defenders of the tiny table.

    The earlier stages run in-process (same code as the CLIs, without 4 interpreter starts),
    once per test session: under pytest-xdist the first worker builds it in the session's
    shared temporary folder and the others wait for it (an atomic ``mkdir`` is the lock).
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    ws, lock, done = shared / "catalogue-prepared", shared / "catalogue-prepared.lock", shared / "catalogue-prepared.done"
    try:
        lock.mkdir()
    except FileExistsError:
        deadline = time.monotonic() + 900
        while not done.exists():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for another worker to prepare {ws}")
            time.sleep(0.5)
        if done.read_text() != "ok":
            pytest.fail(f"another worker failed to prepare {ws}: {done.read_text()}")
        return ws
    try:
        _prepare(ws, repo_root)
    except BaseException as err:
        done.write_text(f"failed: {err}")
        raise
    done.write_text("ok")
    return ws


@pytest.fixture
def ws(prepared: Path, tmp_path: Path) -> Path:
    """A fresh copy of the prepared workspace for one case."""
    dest = tmp_path / "ws"
    shutil.copytree(prepared, dest, symlinks=True)
    return dest


def remove(ws: Path, *rels: str) -> None:
    """Delete stage outputs so that a case can check that the failed stage did not write them."""
    for rel in rels:
        p = ws / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


def rewrite_npz(path: Path, **changes: np.ndarray) -> None:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(path, **arrays)


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def run_ok(ws: Path, stage: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", f"stages.{stage}", "--params", "params.yaml"], cwd=ws,
                          env=stage_env(ws), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc
