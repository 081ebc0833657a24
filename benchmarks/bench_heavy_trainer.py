"""Issue 35: auditing a trainer whose every fit costs real CPU seconds — plan, budget, parallel fits, resume.

A ``kind: python`` trainer (logistic regression plus a fixed amount of single-threaded matrix work, about
``--fit-seconds`` per fit on this machine) is audited in a fresh workspace (a copy of the pipeline, ``git init``,
``dvc init``) with ``dvc repro``. Measured:

1. **estimate vs wall time**: the plan stage's estimate of the timed fits (``data/.timings/plan.json``) against
   the measured wall time of the stages that run them (ltu, canaries, one_run), at ``compute.n_jobs: 1``;
2. **parallel fits**: the canaries stage again with ``compute.n_jobs: 2`` (shards removed first): speed-up,
   and every metric file byte-identical to the one-process run;
3. **resume**: the canaries stage killed after ``--kill-after`` seconds, then rerun: it reports the shards
   already finished and runs only the rest;
4. **budget**: ``blackbox.sequential_runs: 320`` under ``compute.budget_minutes: --budget``: the plan stops,
   naming the largest ``blackbox.sequential_runs`` that fits (issue 43: the budget is a guard); the benchmark
   takes that count, and the wall time of every stage after ``defenders`` is compared with the budget, the
   canaries stage's with its estimate, and the detectable ε it reports (``metrics/audit.json``) is printed.

Run: ``python -m benchmarks.bench_heavy_trainer [--fit-seconds 1] [--budget 3]`` (writes
``benchmarks/results/heavy_trainer.txt``). Needs an otherwise idle machine for the speed-up to mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from privaudit.planning.cost import STAGE_STARTUP_S

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("dvc.yaml", ".dvcignore", "releases.yaml", "stages", "src", "benchmarks/results", "data/external")

TRAINER = '''"""A trainer whose fit costs a fixed amount of real CPU work (benchmarks/bench_heavy_trainer.py)."""
import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

WORK = {work}  # 256x256 matrix products per fit


def train(X, y, n_classes, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((256, 256)) / 16.0
    with threadpool_limits(1):
        b = a
        for _ in range(WORK):
            b = np.tanh(b @ a)
        return LogisticRegression(max_iter=300, C=0.5).fit(X, y)
'''


def _calibrate(seconds: float) -> int:
    """Matrix products per fit that take ``seconds`` single-threaded here."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).standard_normal((256, 256)) / 16.0
    with threadpool_limits(1):
        start, n, b = time.perf_counter(), 0, a
        while time.perf_counter() - start < 1.0:
            b, n = np.tanh(b @ a), n + 1
    return max(1, int(n * seconds / (time.perf_counter() - start)))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(DO_NOT_TRACK="1", DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="False", CI="1", PYTHONHASHSEED="0")
    return env


def _run(cmd: list[str], cwd: Path, check: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    if check and proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start, proc.stdout + ("" if check else proc.stderr)


def _workspace(dest: Path, params: dict, work: int) -> Path:
    dest.mkdir(parents=True)
    for name in COPIED:
        src = ROOT / name
        (shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
         if src.is_dir() else shutil.copy2(src, dest / name))
    (dest / "heavy_trainer.py").write_text(TRAINER.format(work=work))
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "add", "heavy_trainer.py"],
                [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=dest, check=True, env=_env())
    return dest


def _params(n_jobs: int, runs: int, budget: float | None, lidp_trials: int) -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["defenders"] = [{"name": "heavy", "kind": "python", "target": "heavy_trainer.py:train",
                            "claimed_epsilon": 2.0, "claimed_delta": 1e-5}]
    params["ltu"].update(attackers=["loss_gap", "score_best"], risk_reference_models=0)
    params["lidp"].update(trials=lidp_trials)
    params["compute"].update(n_jobs=n_jobs, budget_minutes=budget)
    params["blackbox"].update(sequential_runs=runs)
    return params


def _set(ws: Path, **compute: object) -> None:
    p = yaml.safe_load((ws / "params.yaml").read_text())
    for key, value in compute.items():
        block, name = key.split("__")
        p[block][name] = value
    (ws / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))


def _repro_stages(ws: Path, stages: list[str]) -> dict[str, float]:
    """Run ``dvc repro --single-item`` stage by stage; wall seconds of each."""
    out = {}
    for stage in stages:
        out[stage], _ = _run([sys.executable, "-m", "dvc", "repro", "--single-item", stage], ws)
    return out


def _metrics(ws: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ws / "metrics").glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit-seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=64, help="black-box runs per side of the n_jobs comparison")
    ap.add_argument("--lidp-trials", type=int, default=8)
    ap.add_argument("--budget", type=float, default=3.0, help="compute.budget_minutes of the budget run")
    ap.add_argument("--kill-after", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/heavy_trainer.txt")
    args = ap.parse_args(argv)
    work = _calibrate(args.fit_seconds)
    lines = [f"# bench_heavy_trainer: fit ~{args.fit_seconds} s ({work} 256x256 products + a logistic regression), "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}"]
    upstream = ["user_code", "environment", "ingest", "split", "featurize", "defenders", "plan"]
    fits = ["ltu", "canaries", "one_run"]
    rest = ["whitebox", "game3", "blackbox", "lidp", "audit", "bounds", "report"]
    with tempfile.TemporaryDirectory() as tmp:
        ws = _workspace(Path(tmp) / "ws", _params(1, args.runs, None, args.lidp_trials), work)
        _repro_stages(ws, upstream)
        plan = json.loads((ws / "data/.timings/plan.json").read_text())
        est = plan["estimated_seconds"]
        wall1 = _repro_stages(ws, fits)
        _repro_stages(ws, rest)
        measured = sum(wall1.values())
        d = plan["defenders"]["heavy"]
        lines.append(f"1. plan at n_jobs 1: {d['fits']} fits, {d['model_seconds']:.2f} s per fit, estimate "
                     f"{est:.0f} s; measured ltu+canaries+one_run {measured:.0f} s (stage start-up included): "
                     f"estimate/measured = {est / measured:.2f}")
        one = _metrics(ws)
        shutil.rmtree(ws / "data/.shards")
        _set(ws, compute__n_jobs=2)
        _repro_stages(ws, ["plan"])
        # compute.n_jobs is no canaries param (same outputs for any count): force the stage to measure it
        wall2 = {"canaries": _run([sys.executable, "-m", "dvc", "repro", "--single-item", "-f", "canaries"], ws)[0]}
        _repro_stages(ws, rest)
        same = _metrics(ws) == one
        lines.append(f"2. canaries stage: n_jobs 1 {wall1['canaries']:.0f} s, n_jobs 2 {wall2['canaries']:.0f} s: "
                     f"{wall1['canaries'] / wall2['canaries']:.2f}x; every metrics/*.json byte-identical: {same}")
        shutil.rmtree(ws / "data/.shards")
        proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", "--single-item", "-f", "canaries"], cwd=ws,
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        time.sleep(args.kill_after)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        t, out = _run([sys.executable, "-m", "dvc", "repro", "--single-item", "-f", "canaries"], ws)
        finished = next((l for l in out.splitlines() if "already finished" in l), "?")
        _repro_stages(ws, rest)
        lines.append(f"3. killed after {args.kill_after:.0f} s, rerun {t:.0f} s: '{finished.strip()}'; metrics "
                     f"byte-identical: {_metrics(ws) == one}")
        _set(ws, compute__n_jobs=1, compute__budget_minutes=args.budget, blackbox__sequential_runs=320)
        # issue 43: the budget is a guard: the plan stops, naming the largest sequential_runs that fits; take it
        _, out = _run([sys.executable, "-m", "dvc", "repro", "--single-item", "plan"], ws, check=False)
        stop = next((l for l in out.splitlines() if "stage plan failed" in l), "")
        proposed = re.search(r"blackbox\.sequential_runs=(\d+)`", stop)
        lines.append(f"4. budget {args.budget:g} min with sequential_runs 320: {stop.strip() or 'the plan fits'}")
        if proposed:
            _set(ws, blackbox__sequential_runs=int(proposed.group(1)))
        _, out = _run([sys.executable, "-m", "dvc", "repro", "--single-item", "plan"], ws)
        plan_lines = [l for l in out.splitlines() if l.startswith("plan:")]
        plan4 = json.loads((ws / "data/.timings/plan.json").read_text())["defenders"]["heavy"]
        wall4 = _repro_stages(ws, ["canaries", "ltu", "one_run", *rest])
        total = sum(wall4.values()) + sum(_repro_stages(ws, ["plan"]).values())
        audit = json.loads((ws / "metrics/audit.json").read_text())
        det = {k: (audit.get("heavy", {}).get(k) or {}).get("detectable_epsilon") for k in ("blackbox", "one_run", "game3")}
        est4 = plan4["stages"]["canaries"]["seconds"] + STAGE_STARTUP_S
        lines.append(f"   at the proposed size, n_jobs 1: the stages after defenders took "
                     f"{total / 60:.1f} min (the budget covers the timed fits and their stages' start-up); "
                     f"detectable eps {det}")
        lines.append(f"   plan from the {plan4['timed_by']} ({plan4['model_seconds']:.2f} s per fit): canaries "
                     f"estimate {est4:.0f} s (start-up included), measured {wall4['canaries']:.0f} s: "
                     f"estimate/measured = {est4 / wall4['canaries']:.2f}")
        lines += ["   " + l for l in plan_lines]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
