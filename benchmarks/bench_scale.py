"""The whole audit at a user's scale: ``dvc repro`` of the default params on a synthetic n x d x k embedding CSV.

A seeded Gaussian mixture (k classes, float32 features, class means ~ N(0, sep^2 / d) per coordinate,
unit noise) is written as a CSV; a scratch copy of this repository's pipeline (dvc.yaml, stages/, src/,
as tests/pipeline/conftest.py ``make_workspace`` does) gets the DEFAULT params.yaml except
``dataset: {name: csv, path: data/external/scale.csv, label_column: label}`` and ``base.device``; then
``dvc repro`` runs there. Every stage command is wrapped (``.bench/wrap.py`` in the scratch copy), which
records per stage: wall time, peak RSS of the stage process tree (``getrusage(RUSAGE_CHILDREN)``), the
exit code and, on CUDA, the stage's peak GPU memory (``torch.cuda.max_memory_allocated``, written by
``stages/_runner.py`` when ``PRIVAUDIT_GPU_PEAK_FILE`` is set). Fits per stage and the plan's estimate
come from ``data/.timings/plan.json`` (the plan stage's record). ``--profile STAGE`` runs that stage
under cProfile (its wall is then inflated by the profiler) and puts the top 25 entries by cumulative
time in the results. ``--timeout`` stops ``dvc repro`` and still writes what finished (the cut-off stage
with its elapsed time and the last lines of its output).

    python benchmarks/bench_scale.py [--n 10000] [--d 128] [--k 10] [--device cpu|cuda|auto] [--gpu]
        [--timeout SECONDS] [--profile STAGE] [--set block.key=value ...] [--repo PATH] [--tag NAME]

Writes ``benchmarks/results/scale_<n>x<d>_<device>[_<tag>].txt`` and ``.json``. ``PY`` and ``DVC`` name
another interpreter and DVC command (default: this interpreter and ``<it> -m dvc``), as in gpu_check.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("dvc.yaml", ".dvcignore", "releases.yaml", "stages", "src", "benchmarks/results")
CSV_NAME = "scale.csv"

#: written into the scratch copy; wraps one stage command (dvc.yaml cmd) and appends one JSON line
WRAPPER = r'''
import json, os, resource, subprocess, sys, threading, time
stage, log, profile = sys.argv[1], sys.argv[2], sys.argv[3]
cmd = sys.argv[4:]
gpu_file = os.path.abspath(f".bench/gpu_{stage}.txt")
env = dict(os.environ, PRIVAUDIT_GPU_PEAK_FILE=gpu_file)
if profile == stage and cmd[:2] == ["python", "-m"]:
    cmd = ["python", "-m", "cProfile", "-o", os.path.abspath(f".bench/profile_{stage}.out")] + cmd[1:]
with open(log, "a") as f:
    f.write(json.dumps({"stage": stage, "event": "start", "t": time.time()}) + "\n")
t0 = time.perf_counter()
# the stage's stdout passed through, each line also kept with the time it arrived (.bench/lines.jsonl: the ETA
# lines' accuracy); stderr is left alone (a terminal's bars, warnings)
proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
def pump():
    with open(os.path.abspath(".bench/lines.jsonl"), "a") as f:
        for raw in iter(proc.stdout.readline, b""):
            t = time.time()
            sys.stdout.buffer.write(raw)
            sys.stdout.buffer.flush()
            f.write(json.dumps({"stage": stage, "t": t, "line": raw.decode("utf-8", "replace").rstrip("\n")}) + "\n")
            f.flush()
reader = threading.Thread(target=pump, daemon=True)
reader.start()
rc = proc.wait()
wall = time.perf_counter() - t0
reader.join(timeout=5)  # a worker the stage left behind may hold the pipe open: do not wait for it
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
gpu = None
if os.path.exists(gpu_file):
    gpu = int(open(gpu_file).read().strip() or 0)
with open(log, "a") as f:
    f.write(json.dumps({"stage": stage, "event": "end", "t": time.time(), "wall_s": wall, "rc": rc,
                        "max_rss_mib": ru.ru_maxrss / 1024, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
                        "gpu_peak_mib": None if gpu is None else gpu / 2**20, "profiled": profile == stage}) + "\n")
sys.exit(rc)
'''


def _csv_rows(block: tuple[np.ndarray, np.ndarray]) -> str:
    x, yy = block
    rows = np.column_stack([np.char.mod("%.5g", x), yy.astype(str)])
    return "\n".join(",".join(r) for r in rows) + "\n"


def write_csv(path: Path, n: int, d: int, k: int, seed: int, sep: float) -> None:
    """A k-class Gaussian mixture, n rows of d float32 features and an int label column: drawn in chunks of 2000
    rows in order (the same bytes whatever the machine), formatted by a pool of processes (50k x 512 took 35 s
    on one core)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, sep / np.sqrt(d), size=(k, d)).astype(np.float32)
    y = rng.integers(0, k, n)
    blocks = []
    for lo in range(0, n, 2000):
        yy = y[lo:lo + 2000]
        blocks.append(((means[yy] + rng.normal(size=(len(yy), d))).astype(np.float32), yy))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f, ProcessPoolExecutor(min(len(blocks), os.cpu_count() or 1)) as pool:
        f.write(",".join([f"f{j}" for j in range(d)] + ["label"]) + "\n")
        for text in pool.map(_csv_rows, blocks):
            f.write(text)
    tmp.replace(path)


def cached_csv(n: int, d: int, k: int, seed: int, sep: float) -> Path:
    """The CSV in a per-user cache (generation of 50k x 512 takes a minute; it is not part of the audit)."""
    cache = Path(os.environ.get("PRIVAUDIT_BENCH_CACHE", Path(tempfile.gettempdir()) / "privaudit_bench_scale"))
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"mixture_{n}x{d}x{k}_seed{seed}_sep{sep:g}.csv"
    if not path.exists():
        t0 = time.perf_counter()
        write_csv(path, n, d, k, seed, sep)
        print(f"bench_scale: wrote {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def set_key(params: dict, dotted: str, value: str) -> None:
    """``block.key=value`` (value parsed as YAML), like ``dvc exp run -S``."""
    *blocks, key = dotted.split(".")
    node = params
    for b in blocks:
        node = node.setdefault(b, {})
    node[key] = yaml.safe_load(value)


def make_workspace(repo: Path, dest: Path, params: dict, csv: Path | None, dvc: list[str], env: dict) -> None:
    """Copy the pipeline into ``dest``, wrap every stage command, git init + dvc init there."""
    for name in COPIED:
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "gpu"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    (dest / "data" / "external").mkdir(parents=True)
    target = dest / "data" / "external" / CSV_NAME
    if csv is None:
        pass
    elif os.stat(csv).st_dev == os.stat(dest).st_dev:
        os.link(csv, target)  # no copy of a large CSV (DVC hashes it; nothing writes to it)
    else:
        shutil.copy2(csv, target)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (dest / ".bench").mkdir()
    (dest / ".bench" / "wrap.py").write_text(WRAPPER)
    dvcyaml = yaml.safe_load((dest / "dvc.yaml").read_text())
    for name, stage in dvcyaml["stages"].items():
        stage["cmd"] = f"python .bench/wrap.py {name} .bench/stages.jsonl $PRIVAUDIT_BENCH_PROFILE {stage['cmd']}"
    (dest / "dvc.yaml").write_text(yaml.safe_dump(dvcyaml, sort_keys=False))
    (dest / ".gitignore").write_text("/.bench\n")
    for cmd in (["git", "init", "-q"], dvc + ["init", "-q"], dvc + ["config", "core.analytics", "false"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)


def read_events(log: Path) -> dict[str, dict]:
    stages: dict[str, dict] = {}
    if not log.exists():
        return stages
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        s = stages.setdefault(ev["stage"], {"stage": ev["stage"]})
        if ev["event"] == "start":
            s["start"] = ev["t"]
        else:
            s.update({k: v for k, v in ev.items() if k not in ("event", "t", "stage")})
            s["end"] = ev["t"]
    return stages


def read_lines(path: Path) -> list[dict]:
    """The stages' stdout lines with their arrival times (the wrapper's ``.bench/lines.jsonl``; [] when none)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut off by the timeout
    return out


def plan_record(ws: Path) -> dict | None:
    """The plan stage's record (fits and estimated seconds per defender and stage), if it ran."""
    path = ws / "data" / ".timings" / "plan.json"
    return json.loads(path.read_text()) if path.exists() else None


def fits_per_stage(plan: dict | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in (plan or {}).get("defenders", {}).values():
        for stage, s in (d.get("stages") or {}).items():
            out[stage] = out.get(stage, 0) + int(s.get("fits") or 0)
    return out


def plan_fit_seconds_per_stage(plan: dict | None) -> dict[str, float]:
    """The planned seconds of each stage's fits (summed over defenders)."""
    out: dict[str, float] = {}
    for d in (plan or {}).get("defenders", {}).values():
        for stage, s in (d.get("stages") or {}).items():
            if s.get("seconds") is not None:
                out[stage] = out.get(stage, 0.0) + float(s["seconds"])
    return out


def plan_seconds_per_stage(plan: dict | None) -> dict[str, float]:
    """The plan's estimate of each stage: its fits plus its fixed cost (start-up, work besides fits).

    Results written before 2026-11-28 showed the fits alone in their ``plan s`` column; their .json keeps the
    whole plan, so ``--render`` puts the estimate there."""
    stages = (plan or {}).get("stages") or {}
    out = plan_fit_seconds_per_stage(plan)
    out.update({stage: float(s["seconds"]) for stage, s in stages.items() if s.get("seconds") is not None})
    return out


def output_digests(ws: Path) -> dict[str, str]:
    """sha256 of every metrics file and DVC's md5 of every stage output (dvc.lock): byte-identity across runs."""
    import hashlib

    out = {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted((ws / "metrics").glob("*.json"))}
    lock = ws / "dvc.lock"
    if lock.exists():
        for name, st in (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).items():
            for o in st.get("outs", []):
                out.setdefault(o["path"], o.get("md5"))
    return out


def gate_verdict(ws: Path) -> dict | None:
    """The release gate's verdict of this run (metrics/gate.json): passed, and per defender."""
    path = ws / "metrics" / "gate.json"
    if not path.exists():
        return None
    gate = json.loads(path.read_text())
    return {"passed": gate.get("passed"), "defenders": {k: v.get("passed") for k, v in gate.get("defenders", {}).items()}}


#: a progress line of :class:`privaudit.progress.FitProgress` (``<desc>: [<what> done; ]k of N <unit>s, <rate>, ETA ...``)
PROGRESS_LINE = re.compile(r"^(?P<desc>.+): (?:(?P<what>[^:]*) done; )?(?P<done>\d+) of (?P<total>\d+) (?P<unit>\w+?)s?, "
                           r".*, ETA (?P<eta>--|(?:\d+:)?\d+:\d\d)$")
#: the ETA's resolution (it is shown in whole seconds): the error of an ETA line is measured as
#: max((shown + 1) / (actual + 1), (actual + 1) / (shown + 1)), so that "ETA 0:01" with 0.2 s to go is not "5x off"
ETA_RESOLUTION_S = 1.0


def _clock_seconds(text: str) -> float:
    parts = [int(x) for x in text.split(":")]
    return float(sum(v * 60 ** i for i, v in enumerate(reversed(parts))))


def eta_accuracy(lines: list[dict]) -> list[dict]:
    """How right the ETA lines of each progress (stage, description) were: for every line with an ETA, the seconds it
    showed against the seconds until that progress's last line (its work done), off by the factor
    ``max((shown + 1) / (actual + 1), (actual + 1) / (shown + 1))`` (:data:`ETA_RESOLUTION_S`); lines still at
    ``ETA --`` once a tenth of the units was done are counted (issue 43: no ETA before it can be known, never off by
    more than 2x once 10 % of a stage is done). ``lines``: ``{"stage", "t", "line"}`` records (``.bench/lines.jsonl``).

    >>> rec = lambda t, line: {"stage": "canaries", "t": t, "line": line}
    >>> out = eta_accuracy([rec(0, "canaries: a done; 1 of 4 trials, 1 trials/s, ETA --"),
    ...                     rec(10, "canaries: b done; 2 of 4 trials, 1 trials/s, ETA 0:10"),
    ...                     rec(20, "canaries: c done; 3 of 4 trials, 1 trials/s, ETA 0:25"),
    ...                     rec(30, "canaries: d done; 4 of 4 trials, 1 trials/s, ETA 0:00")])
    >>> [(o["progress"], o["eta_lines"], o["max_off"], o["dashes_after_tenth"]) for o in out]
    [('canaries: canaries', 3, 2.36, 1)]
    """
    series: dict[tuple[str, str], list[tuple[float, int, int, float | None]]] = {}
    for rec in lines:
        m = PROGRESS_LINE.match(rec.get("line", ""))
        if m is None:
            continue
        eta = None if m["eta"] == "--" else _clock_seconds(m["eta"])
        series.setdefault((rec["stage"], m["desc"]), []).append((float(rec["t"]), int(m["done"]), int(m["total"]), eta))
    out = []
    for (stage, desc), rows in series.items():
        end = rows[-1][0]
        offs, worst = [], None
        for t, _, _, eta in rows:
            if eta is None:
                continue
            actual = end - t
            off = max((eta + ETA_RESOLUTION_S) / (actual + ETA_RESOLUTION_S), (actual + ETA_RESOLUTION_S) / (eta + ETA_RESOLUTION_S))
            offs.append(off)
            if worst is None or off > worst[0]:
                worst = (off, eta, actual, t - rows[0][0])
        out.append({"progress": f"{stage}: {desc}", "lines": len(rows), "eta_lines": len(offs),
                    "dashes_after_tenth": sum(1 for _, done, total, eta in rows if eta is None and done >= 0.1 * total),
                    "finished": rows[-1][1] == rows[-1][2], "span_s": round(end - rows[0][0], 1),
                    "max_off": None if worst is None else round(worst[0], 2),
                    "worst": None if worst is None else {"shown_s": worst[1], "actual_s": round(worst[2], 1),
                                                         "at_s": round(worst[3], 1)},
                    # (seconds since the progress's first line, done, total, ETA shown or None) of every line
                    "rows": [(round(t - rows[0][0], 2), done, total, eta) for t, done, total, eta in rows]})
    return out


def top_profile(path: Path, n: int = 25) -> str:
    """The profile's top ``n`` entries by cumulative time; a file that cProfile had not finished writing when the
    stage was stopped (empty or truncated) is reported as such, so that the rest of the results is still written."""
    import io

    buf = io.StringIO()
    try:
        pstats.Stats(str(path), stream=buf).strip_dirs().sort_stats("cumulative").print_stats(n)
    except (EOFError, ValueError, TypeError) as exc:  # marshal's errors on a truncated or empty file
        return (f"profile unreadable ({type(exc).__name__}: {exc}): {path.name}, {path.stat().st_size} bytes, "
                "was probably still being written when the stage was stopped")
    text = buf.getvalue()
    start = text.find("   ncalls")
    return text[start:] if start >= 0 else text


def device_name(py: str, device: str) -> str:
    if device == "cpu":
        return f"cpu ({platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores)"
    out = subprocess.run([py, "-c", "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() "
                                    "else 'no CUDA')"], capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()[-200:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (the audit keeps base.seed)")
    ap.add_argument("--sep", type=float, default=6.0, help="distance scale of the class means (in noise units)")
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu", help="base.device of the audit")
    ap.add_argument("--gpu", action="store_true", help="same as --device cuda")
    ap.add_argument("--timeout", type=float, default=None, help="stop dvc repro after this many seconds "
                                                                 "(partial results are written)")
    ap.add_argument("--profile", default="", help="stage to run under cProfile (top 25 cumulative in the results)")
    ap.add_argument("--set", action="append", default=[], metavar="BLOCK.KEY=VALUE",
                    help="override a params key (YAML value), e.g. --set compute.n_jobs=1")
    ap.add_argument("--data", choices=["synthetic", "params"], default="synthetic",
                    help="params: keep params.yaml's dataset block (the default digits audit) instead of the CSV")
    ap.add_argument("--warm", action="store_true", help="run `privaudit warm -- dvc repro` (one warm stage server; "
                    "the CPU s and peak RSS columns then count only each stage's client process)")
    ap.add_argument("--target", default="", help="dvc repro only this stage and what it depends on")
    ap.add_argument("--repo", type=Path, default=ROOT, help="repository whose pipeline is copied (default: this one)")
    ap.add_argument("--tag", default="", help="suffix of the result file names")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--keep", action="store_true", help="keep the scratch workspace (its path is printed)")
    args = ap.parse_args()
    device = "cuda" if args.gpu else args.device

    py = os.environ.get("PY") or sys.executable
    py_path = os.path.abspath(shutil.which(py) or py)
    dvc = shlex.split(os.environ.get("DVC") or f"{shlex.quote(py_path)} -m dvc")
    if os.sep in dvc[0]:  # a relative command (gpu_check.sh: .venv/bin/dvc) must survive the cd to the copy
        dvc[0] = os.path.abspath(dvc[0])
    repo = args.repo.resolve()
    params = yaml.safe_load((repo / "params.yaml").read_text())
    if args.data == "synthetic":
        params["dataset"] = {**params["dataset"], "name": "csv", "path": f"data/external/{CSV_NAME}",
                             "label_column": "label", "max_samples": None}
    params["base"]["device"] = device
    for item in args.set:
        key, _, value = item.partition("=")
        set_key(params, key, value)

    csv = cached_csv(args.n, args.d, args.k, args.seed, args.sep) if args.data == "synthetic" else None
    ws = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    env = dict(os.environ, DO_NOT_TRACK="1", DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="False", CI="1",
               PRIVAUDIT_BENCH_PROFILE=args.profile or "-",
               PYTHONPATH=os.pathsep.join([str(ws / "src"), str(ws), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["PATH"] = f"{Path(py_path).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` in dvc.yaml = $PY
    make_workspace(repo, ws, params, csv, dvc, env)
    log_path = ws / ".bench" / "repro.log"

    load_before = os.getloadavg()
    what = f"{args.n} x {args.d} x {args.k}" if args.data == "synthetic" else params["dataset"]["name"]
    print(f"bench_scale: {what} on {device}, workspace {ws}, load {load_before}", flush=True)
    t0 = time.perf_counter()
    cut_off = False
    with open(log_path, "w") as log:
        warm = [py_path, "-m", "privaudit.cli", "warm", "--"] if args.warm else []
        proc = subprocess.Popen(warm + dvc + ["repro"] + ([args.target] if args.target else []), cwd=ws, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            cut_off = True
            # SIGINT first, as Ctrl-C would: a stage under cProfile (--profile) writes its profile on the
            # KeyboardInterrupt, so a cut-off run still shows where the stage spent its time
            os.killpg(proc.pid, signal.SIGINT)
            try:
                rc = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
    total = time.perf_counter() - t0
    load_after = os.getloadavg()

    stages = read_events(ws / ".bench" / "stages.jsonl")
    for s in stages.values():
        if "end" not in s:
            s["cut_off_after_s"] = (time.time() - s["start"]) if cut_off else None
    plan = plan_record(ws)
    fits, plan_s, fit_s = fits_per_stage(plan), plan_seconds_per_stage(plan), plan_fit_seconds_per_stage(plan)
    order = sorted(stages.values(), key=lambda s: s.get("start", 0))
    profile_text = None
    if args.profile and (ws / ".bench" / f"profile_{args.profile}.out").exists():
        profile_text = top_profile(ws / ".bench" / f"profile_{args.profile}.out")
    tail = log_path.read_text().splitlines()[-15:]

    result = {
        "size": ({"n": args.n, "d": args.d, "k": args.k, "seed": args.seed, "sep": args.sep}
                 if args.data == "synthetic" else None), "dataset": params["dataset"], "target": args.target or None,
        "device": device, "warm": args.warm, "device_name": device_name(py, device), "host": platform.node(),
        "cores": len(os.sched_getaffinity(0)), "load_before": load_before, "load_after": load_after,
        "repo": str(repo), "overrides": args.set, "dvc_rc": rc, "cut_off": cut_off, "timeout_s": args.timeout,
        "total_wall_s": total, "stages": order, "fits_per_stage": fits, "plan_seconds_per_stage": plan_s,
        "plan_fit_seconds_per_stage": fit_s,
        "plan_estimated_seconds": (plan or {}).get("estimated_seconds"), "plan": plan,
        "eta_accuracy": eta_accuracy(read_lines(ws / ".bench" / "lines.jsonl")),
        "digests": output_digests(ws), "gate": gate_verdict(ws), "profile_stage": args.profile or None, "profile_top25_cumulative": profile_text, "repro_tail": tail,
    }
    size_name = f"{args.n}x{args.d}" if args.data == "synthetic" else params["dataset"]["name"]
    stem = f"scale_{size_name}_{device}" + (f"_{args.tag}" if args.tag else "")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (args.out_dir / f"{stem}.txt").write_text(render(result))
    print(render(result), flush=True)
    if not args.keep:
        shutil.rmtree(ws, ignore_errors=True)
    return 0 if rc == 0 or cut_off else 1


def plan_accuracy(r: dict) -> dict[str, float]:
    """The plan's estimate of each stage it plans over that stage's measured wall (finished stages only).

    >>> plan = {"stages": {"ltu": {"seconds": 20.0}, "canaries": {"seconds": 101.0}}, "defenders": {}}
    >>> plan_accuracy({"plan": plan, "stages": [{"stage": "ltu", "wall_s": 19.1}, {"stage": "canaries", "start": 0.0}]})
    {'ltu': 1.05}
    """
    planned = plan_seconds_per_stage(r.get("plan")) if r.get("plan") else r.get("plan_seconds_per_stage") or {}
    walls = {s["stage"]: s.get("wall_s") for s in r.get("stages", [])}
    return {stage: round(sec / walls[stage], 2) for stage, sec in planned.items()
            if walls.get(stage) and sec is not None}


def render(r: dict) -> str:
    size = r["size"]
    data = (f"a synthetic {size['n']} x {size['d']} x {size['k']} Gaussian-mixture CSV (seed {size['seed']}, "
            f"sep {size['sep']:g})" if size else f"dataset {r['dataset']['name']}")
    lines = [
        f"bench_scale: dvc repro {r.get('target') or ''}{' ' if r.get('target') else ''}of the default params on {data}, "
        f"base.device {r['device']}" + (", under `privaudit warm` (one warm stage server; CPU s and peak RSS count "
                                        "only each stage's client process)" if r.get("warm") else ""),
        f"machine: {r['device_name']}, {r['cores']} cores visible, host {r['host']}; load average before "
        f"{'/'.join(f'{x:.2f}' for x in r['load_before'])}, after {'/'.join(f'{x:.2f}' for x in r['load_after'])}",
        f"pipeline from {r['repo']}" + (f"; overrides {r['overrides']}" if r["overrides"] else ""),
        f"total wall {r['total_wall_s']:.1f} s (dvc repro exit {r['dvc_rc']}"
        + (f"; CUT OFF by --timeout {r['timeout_s']:g} s" if r["cut_off"] else "") + ")",
        f"plan stage estimate: {r['plan_estimated_seconds']}",
        f"release gate (metrics/gate.json): {r.get('gate')}",
        "",
        f"{'stage':<12} {'wall s':>8} {'CPU s':>8} {'fits':>6} {'plan s':>8} {'fits s':>7} {'peak RSS MiB':>13} "
        f"{'GPU peak MiB':>13}  note",
    ]
    for s in r["stages"]:
        wall = s.get("wall_s")
        note = []
        if s.get("profiled"):
            note.append("under cProfile")
        if wall is None:
            note.append(f"cut off after {s.get('cut_off_after_s') or 0:.0f} s" if r["cut_off"] else "unfinished")
        elif s.get("rc"):
            note.append(f"exit {s['rc']}")
        gpu = s.get("gpu_peak_mib")
        rss = f"{s['max_rss_mib']:.0f}" if "max_rss_mib" in s else "-"
        fits = r["fits_per_stage"].get(s["stage"])
        plan = plan_seconds_per_stage(r["plan"]).get(s["stage"]) if r.get("plan") else r["plan_seconds_per_stage"].get(s["stage"])
        fit_s = plan_fit_seconds_per_stage(r.get("plan")).get(s["stage"])
        cpu = f"{s['user_s'] + s['sys_s']:.1f}" if "user_s" in s else "-"
        lines.append(f"{s['stage']:<12} {('-' if wall is None else f'{wall:.1f}'):>8} {cpu:>8} "
                     f"{('' if fits is None else fits):>6} {('' if plan is None else f'{plan:.0f}'):>8} "
                     f"{('' if fit_s is None else f'{fit_s:.0f}'):>7} "
                     f"{rss:>13} "
                     f"{('-' if gpu is None else f'{gpu:.0f}'):>13}  {'; '.join(note)}")
    ratios = plan_accuracy(r)
    if ratios:
        lines.append("")
        lines.append("plan's estimate / wall per audit stage (issue 43: within 25 %): "
                     + ", ".join(f"{stage} {ratio:.2f}" for stage, ratio in ratios.items()))
    lines.append("")
    lines.append("CPU s: user + system time of the stage's processes (its workers included); fits: per stage from "
                 "the plan's record (data/.timings/plan.json); plan s: its estimate per stage (fits and fixed cost); "
                 "fits s: the fits' part of it")
    acc = r.get("eta_accuracy") or []
    if acc:
        lines += ["", "ETA lines (issue 43: none before it can be known; never off by more than 2x once 10 % is done): per "
                      "progress, the lines with an ETA, the worst factor between the ETA shown and the time its work "
                      f"still took ((shown + {ETA_RESOLUTION_S:g}) / (actual + {ETA_RESOLUTION_S:g}) or its inverse), and "
                      "lines still without an ETA after a tenth of the units"]
        for a in acc:
            w = a["worst"]
            worst = (f"worst {a['max_off']:.2f}x (ETA {w['shown_s']:.0f} s shown {w['at_s']:.0f} s in, {w['actual_s']:.0f} s "
                     "taken)") if w else "no ETA shown"
            lines.append(f"  {a['progress']}: {a['lines']} lines over {a['span_s']:.0f} s, {a['eta_lines']} with an ETA, "
                         f"{worst}, {a['dashes_after_tenth']} without one after a tenth"
                         + ("" if a["finished"] else " (unfinished)"))
    metrics = {k: v for k, v in r["digests"].items() if k.startswith("metrics/")}
    if metrics:
        lines += ["", "sha256 of the metrics files (byte-identity across runs; every stage output's md5 is in the .json):"]
        lines += [f"  {v[:16]}  {k}" for k, v in metrics.items()]
    if r["profile_top25_cumulative"]:
        lines += ["", f"cProfile of stage {r['profile_stage']}, top 25 by cumulative time:", r["profile_top25_cumulative"]]
    if r["cut_off"] or r["dvc_rc"]:
        lines += ["", "last lines of dvc repro:"] + r["repro_tail"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:  # re-render a result's .txt from its .json
        for path in map(Path, sys.argv[2:]):
            path.with_suffix(".txt").write_text(render(json.loads(path.read_text())))
        sys.exit(0)
    sys.exit(main())
