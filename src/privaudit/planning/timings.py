"""Measured fit times, kept beside (not inside) the versioned results.

The defenders stage times each release fit and records it here; the plan stage reads the times to
estimate what the audits will cost. A time is a measurement of this machine under its current load,
not a result: it lives in ``data/.timings/`` (git- and DVC-ignored, like the shard store), so that a
rerun that only timed differently leaves ``dvc.lock`` and every metric unchanged. An entry is keyed by
everything that decides how long one fit takes: the defender's spec, the digest of a ``kind: python``
trainer's own files and the size of the Defender set it was fitted on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.artifacts import read_json, write_json

__all__ = ["DEFAULT_TIMINGS", "FitTime", "fit_key", "read_fit_times", "record_fit_time", "trainer_digests"]

#: where the measured fit times are kept (ignored by git and DVC)
DEFAULT_TIMINGS = Path("data/.timings/fits.json")


@dataclass(frozen=True)
class FitTime:
    """One measured release fit: ``seconds`` of wall time for defender ``name`` on ``n_defender`` samples."""

    name: str
    key: str
    seconds: float
    n_defender: int


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
            out[name] = FitTime(name=name, key=str(entry["key"]), seconds=float(entry["seconds"]),
                                n_defender=int(entry["n_defender"]))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def record_fit_time(time: FitTime, path: Path = DEFAULT_TIMINGS) -> None:
    """Add or replace the time of ``time.name`` (atomic write; other defenders' times are kept)."""
    times = read_fit_times(path)
    times[time.name] = time
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {n: {"key": t.key, "seconds": t.seconds, "n_defender": t.n_defender}
                      for n, t in sorted(times.items())})


def trainer_digests(defenders: list[Mapping[str, Any]], root: Path) -> dict[str, str]:
    """Digest of each ``kind: python`` defender's own files (:func:`privaudit.user_code.user_code_manifest`),
    by name — the same digest the canary shards are keyed by."""
    from privaudit.artifacts import dumps_json
    from privaudit.user_code import user_code_manifest

    python = [dict(spec) for spec in defenders if spec.get("kind") == "python"]
    manifest = user_code_manifest({"defenders": python}, Path(root))
    return {name: hashlib.sha256(dumps_json(entry).encode()).hexdigest() for name, entry in manifest.items()}
