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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.artifacts import read_json, write_json

__all__ = ["DEFAULT_TIMINGS", "MIN_AUDIT_FITS", "FitTime", "fit_key", "read_fit_times", "record_audit_fit_time",
           "record_fit_time", "record_shard_times"]

#: where the measured fit times are kept (ignored by git and DVC)
DEFAULT_TIMINGS = Path("data/.timings/fits.json")

#: fewest audit fits of a defender whose time per fit the canaries stage records (fewer say little about a long loop)
MIN_AUDIT_FITS = 8


@dataclass(frozen=True)
class FitTime:
    """One measured release fit: ``seconds`` of wall time for defender ``name`` on ``n_defender`` samples;
    ``audit_seconds``: the seconds per fit of the last canaries stage's shards (median over shards) of the same key (``None``:
    none recorded yet)."""

    name: str
    key: str
    seconds: float
    n_defender: int
    audit_seconds: float | None = None

    def planning_seconds(self) -> tuple[float, str]:
        """The seconds per fit the plan uses and where they come from: the audit fits' time when recorded
        (sustained fits, the better estimate of a loop of fits), else the release fit."""
        if self.audit_seconds is not None:
            return self.audit_seconds, "audit fits"
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
            out[name] = FitTime(name=name, key=str(entry["key"]), seconds=float(entry["seconds"]),
                                n_defender=int(entry["n_defender"]),
                                audit_seconds=None if audit is None else float(audit))
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
