"""Measured fit times, kept beside (not inside) the versioned results.

The defenders stage times each release fit and records it here; the canaries stage adds the seconds per
fit its shards took (:func:`record_audit_fit_time`: fits one after the other for minutes, which a
single release fit can under-estimate by a third on a shared machine); the plan stage reads the times to
estimate what the audits will cost, preferring the audit fits' time where one was recorded. A time is a measurement of this machine under its current load,
not a result: it lives in ``data/.timings/`` (git- and DVC-ignored, like the shard store), so that a
rerun that only timed differently leaves ``dvc.lock`` and every metric unchanged. An entry is keyed by
everything that decides how long one fit takes: the defender's spec, the digest of a ``kind: python``
trainer's own files and the size of the Defender set it was fitted on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.artifacts import read_json, write_json

__all__ = ["DEFAULT_TIMINGS", "MIN_AUDIT_FITS", "FitTime", "StageWall", "fit_key", "process_seconds", "read_fit_times",
           "planned_piece_seconds", "read_heavy_startup", "read_stage_walls", "record_audit_fit_time", "record_fit_time",
           "record_heavy_startup", "record_shard_times", "record_stage_wall"]

#: where the measured fit times are kept (ignored by git and DVC)
DEFAULT_TIMINGS = Path("data/.timings/fits.json")

#: fewest audit fits of a defender whose time per fit the canaries stage records (fewer say little about a long loop)
MIN_AUDIT_FITS = 8


@dataclass(frozen=True)
class FitTime:
    """The measured fits of defender ``name`` on ``n_defender`` samples: ``seconds`` of its release fit (one
    call, one-off costs included); ``model_seconds`` / ``call_seconds``: what a call of k models costs after a
    warm-up (``call_seconds + k × model_seconds``; :mod:`privaudit.planning.fit_probe`, ``timed_by`` says how);
    ``audit_seconds``: the seconds per fit of the last canaries stage's shards (median over shards) of the same
    key (``None``: none recorded yet); ``slowdown``: how much slower a call ran on ``slowdown_workers`` workers at
    once (:func:`privaudit.planning.fit_probe.concurrent_slowdown`; ``slowdown_by``: how, or why not measured);
    ``observing_seconds``: the part of ``seconds`` the white-box recording of the release run cost (0: not watched)."""

    name: str
    key: str
    seconds: float
    n_defender: int
    audit_seconds: float | None = None
    model_seconds: float | None = None
    call_seconds: float = 0.0
    timed_by: str = ""
    device: str = ""  # where the fits were timed (``cpu``, ``cuda:0``; empty: not recorded)
    slowdown: float = 1.0
    slowdown_workers: int = 1
    slowdown_by: str = ""
    observing_seconds: float = 0.0  # of ``seconds``, what the release run's recording cost (white-box watch)

    def planning_seconds(self) -> tuple[float, str]:
        """The seconds per fit the plan uses and where they come from: the audit fits' time when recorded
        (sustained fits, the better estimate of a loop of fits), else the measured fits after a warm-up,
        else the release fit."""
        if self.audit_seconds is not None:
            return self.audit_seconds, "audit fits"
        if self.model_seconds is not None:
            return self.model_seconds, self.timed_by or "fits after a warm-up"
        return self.seconds, "release fit"


def fit_key(spec: Mapping[str, Any], user_code: str | None, n_defender: int) -> str:
    """Key of a fit time: sha256 of the spec (as JSON), the trainer files' digest and the Defender-set size."""
    blob = json.dumps({"spec": dict(spec), "user_code": user_code, "n_defender": int(n_defender)},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_fit_times(path: Path = DEFAULT_TIMINGS) -> dict[str, FitTime]:
    """Recorded fit times by defender name; ``{}`` when none were recorded or the file is unreadable
    (a time is a hint for the plan, never a reason to stop an audit)."""
    try:
        raw = read_json(path)
    except (FileNotFoundError, ValueError):
        return {}
    out: dict[str, FitTime] = {}
    for name, entry in (raw.items() if isinstance(raw, dict) else []):
        try:
            audit = entry.get("audit_seconds")
            model = entry.get("model_seconds")
            out[name] = FitTime(name=name, key=str(entry["key"]), seconds=float(entry["seconds"]),
                                n_defender=int(entry["n_defender"]),
                                audit_seconds=None if audit is None else float(audit),
                                model_seconds=None if model is None else float(model),
                                call_seconds=float(entry.get("call_seconds", 0.0)),
                                timed_by=str(entry.get("timed_by", "")), device=str(entry.get("device", "")),
                                slowdown=max(1.0, float(entry.get("slowdown", 1.0))),
                                slowdown_workers=max(1, int(entry.get("slowdown_workers", 1))),
                                slowdown_by=str(entry.get("slowdown_by", "")),
                                observing_seconds=max(0.0, float(entry.get("observing_seconds", 0.0))))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def record_fit_time(time: FitTime, path: Path = DEFAULT_TIMINGS) -> None:
    """Add or replace the release-fit time of ``time.name`` (atomic write; other defenders' times are kept).
    An audit fits' time recorded under the same key is kept; under another key it is dropped (stale)."""
    times = read_fit_times(path)
    old = times.get(time.name)
    if time.audit_seconds is None and old is not None and old.key == time.key:
        time = dataclasses.replace(time, audit_seconds=old.audit_seconds)
    times[time.name] = time
    _write(times, path)


def record_audit_fit_time(name: str, key: str, seconds_per_fit: float, path: Path = DEFAULT_TIMINGS) -> bool:
    """Record the ``seconds_per_fit`` (median over shards) the canaries stage's shards took for defender ``name``, beside its
    release fit of the same ``key``; ``False`` (nothing written) when no release fit of that key is recorded.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "fits.json"
    >>> record_fit_time(FitTime("mine", "k1", 1.5, 900), path)
    >>> record_audit_fit_time("mine", "k1", 2.1, path), read_fit_times(path)["mine"].planning_seconds()
    (True, (2.1, 'audit fits'))
    >>> record_audit_fit_time("mine", "other", 9.0, path), read_fit_times(path)["mine"].audit_seconds
    (False, 2.1)
    """
    if not seconds_per_fit > 0:
        raise ValueError(f"seconds_per_fit must be > 0, got {seconds_per_fit}")
    times = read_fit_times(path)
    old = times.get(name)
    if old is None or old.key != key:
        return False
    times[name] = dataclasses.replace(old, audit_seconds=float(seconds_per_fit))
    _write(times, path)
    return True


def _write(times: dict[str, FitTime], path: Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {n: {"key": t.key, "seconds": t.seconds, "n_defender": t.n_defender}
                      | ({} if t.audit_seconds is None else {"audit_seconds": t.audit_seconds})
                      | ({} if t.model_seconds is None else {"model_seconds": t.model_seconds,
                                                             "call_seconds": t.call_seconds, "timed_by": t.timed_by})
                      | ({"device": t.device} if t.device else {})
                      | ({"slowdown": t.slowdown, "slowdown_workers": t.slowdown_workers,
                          "slowdown_by": t.slowdown_by} if t.slowdown_by else {})
                      | ({"observing_seconds": t.observing_seconds} if t.observing_seconds else {})
                      for n, t in sorted(times.items())})


def record_shard_times(specs: Sequence[Mapping[str, Any]], shards: Mapping[str, Sequence[tuple[int, float]]],
                       n_defender: int, root: Path, path: Path = DEFAULT_TIMINGS) -> dict[str, float]:
    """Record, per sequential defender, the seconds per fit of the shards the canaries stage ran (``shards``:
    name → (fits, seconds) of each shard; one trial of a sequential defender is one fit) under the key of its
    release fit; returns what was recorded. The median over shards of seconds / fits, so that a worker's
    first shard (it imports the trainer's libraries: the plan counts that as worker start-up) does not
    inflate it. Batched defenders (many models per call) and defenders with fewer than
    :data:`MIN_AUDIT_FITS` fits are skipped.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "fits.json"
    >>> spec = {"name": "forest", "kind": "sklearn", "estimator": "random_forest"}
    >>> record_fit_time(FitTime("forest", fit_key(spec, None, 900), 0.5, 900), path)
    >>> record_shard_times([spec], {"forest": [(16, 20.0), (16, 11.2), (16, 12.0)]}, 900, Path("."), path)
    {'forest': 0.75}
    """
    from privaudit.defenders.specs import BATCHED_KINDS
    from privaudit.repro.user_code import user_code_digests

    digests = user_code_digests(list(specs), root)
    recorded: dict[str, float] = {}
    for spec in specs:
        name = str(spec["name"])
        done = [(int(f), float(t)) for f, t in shards.get(name, ()) if f > 0 and t > 0]
        if spec.get("kind") in BATCHED_KINDS or sum(f for f, _ in done) < MIN_AUDIT_FITS:
            continue
        per_fit = float(statistics.median(t / f for f, t in done))
        if record_audit_fit_time(name, fit_key(spec, digests.get(name), n_defender), per_fit, path):
            recorded[name] = per_fit
    return recorded


@dataclass(frozen=True)
class StageWall:
    """The last run of one stage: ``wall_seconds`` from its process start to its end, and the seconds of fits
    the plan had planned for it then (``None``: no plan was recorded); the difference is the stage's fixed cost
    (start-up, loading, attackers, validation, writing: :mod:`privaudit.planning.cost`)."""

    stage: str
    wall_seconds: float
    planned_fit_seconds: float | None

    def fixed_seconds(self) -> float | None:
        if self.planned_fit_seconds is None:
            return None
        return max(0.0, self.wall_seconds - self.planned_fit_seconds)


def process_seconds() -> float | None:
    """Seconds since this stage process started (Linux ``/proc``; ``None`` elsewhere): a stage's start-up included.

    A stage run on the warm server (:mod:`privaudit.repro.warm`) is a fork of the server, started when the
    server took the run; DVC waits from the start of the ``python -m stages.<name>`` process that handed it
    over (its interpreter's start-up, the connection, the fork: 0.6-0.9 s a stage, measured on 2 cores). The
    client names itself in :data:`~privaudit.repro.warm.protocol.CLIENT_ENV`; the wall counts from its start
    when that process is alive and started before this one (else, e.g. a name inherited by an unrelated
    process, from this process's own start).
    """
    import os

    from privaudit.repro.warm.protocol import CLIENT_ENV

    start = _start_seconds("self")
    client = os.environ.get(CLIENT_ENV, "")
    if start is not None and client.isdigit() and int(client) != os.getpid():
        client_start = _start_seconds(client)
        if client_start is not None and client_start <= start:
            start = client_start
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None if start is None else max(0.0, uptime - start)


def _start_seconds(pid: str) -> float | None:
    """When process ``pid`` (``"self"``: this one) started, in seconds since boot (``/proc/<pid>/stat``)."""
    import os

    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def read_stage_walls(path: Path) -> dict[str, StageWall]:
    """Recorded stage walls by stage (``{}`` when none or unreadable: a hint for the plan, never a reason to stop)."""
    try:
        raw = read_json(path)
    except (FileNotFoundError, ValueError):
        return {}
    out = {}
    for stage, e in (raw.items() if isinstance(raw, dict) else []):
        try:
            planned = e.get("planned_fit_seconds")
            out[stage] = StageWall(stage, float(e["wall_seconds"]), None if planned is None else float(planned))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


#: the measured start-up of a stage that trains (``<timings_dir>/startup.json``): interpreter, torch, scikit-learn and
#: Great Expectations imports, loading the features and checking them — what an audit stage pays before its first fit
STARTUP_FILE = "startup.json"


def record_heavy_startup(stage: str, seconds: float, timings_dir: Path) -> None:
    """Record ``stage``'s seconds from its process start to its first fit (the defenders stage records it)."""
    Path(timings_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(timings_dir) / STARTUP_FILE, {"stage": stage, "seconds": float(seconds)})


def read_heavy_startup(timings_dir: Path) -> tuple[float, str] | None:
    """``(seconds, stage that measured it)`` of :func:`record_heavy_startup`; ``None`` when none or unreadable.

    The plan's fixed cost of an audit stage that has not run yet: a measured lower bound of what such a stage pays
    before its first fit (it also validates and writes its outputs after it), far closer than the plan stage's own
    start-up, which imports none of torch, scikit-learn or Great Expectations.
    """
    try:
        raw = read_json(Path(timings_dir) / STARTUP_FILE)
        return float(raw["seconds"]), str(raw["stage"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def record_stage_wall(stage: str, wall_seconds: float, timings_dir: Path) -> None:
    """Record the wall of ``stage``'s run in ``<timings_dir>/stages.json`` with the fits the last plan
    (``<timings_dir>/plan.json``) planned for it; other stages' records are kept."""
    planned = None
    try:
        plan = read_json(Path(timings_dir) / "plan.json")
        planned = float(plan["stages"][stage]["fits_seconds"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        pass
    walls = read_stage_walls(Path(timings_dir) / "stages.json")
    walls[stage] = StageWall(stage, float(wall_seconds), planned)
    Path(timings_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(timings_dir) / "stages.json", {s: {"wall_seconds": w.wall_seconds,
                                                       "planned_fit_seconds": w.planned_fit_seconds}
                                                   for s, w in sorted(walls.items())})


def planned_piece_seconds(plan_json: Path, pieces: Sequence[tuple[str, str, int]],
                          trials: Callable[[str, str], int]) -> list[float] | None:
    """The planned seconds of each piece ``(defender, experiment, trials in it)`` of the canaries stage in the process
    that runs it, from the last plan (``plan.json``): an experiment's seconds there are its share of the stage's wall,
    its calls' own seconds (contention included) over the ``workers`` they are spread over, so they are multiplied
    back by those workers and spread evenly over ``trials(experiment, defender)``. The ETA
    (:class:`privaudit.progress.FitProgress`) compares them with each piece's own seconds: a rate of 1 means the plan
    held (with the wall's share, every piece on 2 workers read about 2 where its plan held, and a defender not yet
    seen, planned halfway between 1 and the others' rate, was planned at ~0.6 of its time). ``None`` when the plan
    lacks one of them (the progress then weighs every trial the same).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "plan.json"
    >>> write_json(path, {"defenders": {"a": {"stages": {"canaries": {"pieces": {"lidp": 6.0, "blackbox": 40.0},
    ...                                                              "workers": 2}}}}})
    >>> planned_piece_seconds(path, [("a", "lidp", 16), ("a", "blackbox", 1000)], lambda e, d: {"lidp": 32}.get(e, 4000))
    [6.0, 20.0]
    >>> planned_piece_seconds(path, [("b", "lidp", 16)], lambda e, d: 32) is None
    True
    """
    try:
        raw = read_json(plan_json)
        out = []
        for defender, experiment, n in pieces:
            stage = raw["defenders"][defender]["stages"]["canaries"]
            workers = int(stage.get("workers", 1))
            if workers < 1:
                raise ValueError(f"workers {workers}")
            total = float(stage["pieces"][experiment]) * workers
            out.append(total * n / max(1, trials(experiment, defender)))
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return out
