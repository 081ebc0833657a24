"""A memo on disk of opacus's noise calibration for ``dp_sgd`` recipes.

``opacus.accountants.utils.get_noise_multiplier`` (a bisection over the accountant's ε) takes about 1.3 s per
(q, steps) on 2 CPU cores, and every stage that builds a ``dp_sgd`` mechanism (defenders, ltu, canaries, one_run, blackbox,
whitebox) calibrated the same σ again in its own process. The memo keeps each result under a key of everything
that determines it: the accountant, ε, δ, q (exact, as hex floats), the number of steps, and the versions of
opacus, numpy, scipy and Python; a key not in the memo is computed as before. It lives in
``$PRIVAUDIT_SIGMA_CACHE`` (default ``~/.cache/privaudit/sigma.json``; set it empty to turn the memo off). A
memo that cannot be read or written is ignored: σ is then computed, never guessed.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path

from privaudit.artifacts import write_json

__all__ = ["ENV", "lookup", "memo_key", "memo_path", "store"]

#: where the memo lives (a file path); empty turns it off
ENV = "PRIVAUDIT_SIGMA_CACHE"


def memo_path() -> Path | None:
    """The memo file, or ``None`` when ``$PRIVAUDIT_SIGMA_CACHE`` is set empty."""
    root = os.environ.get(ENV)
    if root is not None:
        return Path(root) if root.strip() else None
    return Path.home() / ".cache" / "privaudit" / "sigma.json"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def memo_key(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> str:
    """Everything σ depends on: the inputs exactly, and the code that computes it."""
    versions = ",".join(f"{d}={_version(d)}" for d in ("opacus", "numpy", "scipy"))
    return "|".join([accountant, float(epsilon).hex(), float(delta).hex(), float(q).hex(), str(int(steps)), versions,
                     f"python={sys.version_info[0]}.{sys.version_info[1]}"])


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, float)} if isinstance(data, dict) else {}


def lookup(key: str) -> float | None:
    """σ remembered under ``key``, or ``None``."""
    path = memo_path()
    return None if path is None else _read(path).get(key)


def store(key: str, sigma: float) -> None:
    """Remember ``sigma`` under ``key`` (atomically; a memo that cannot be written is left as it is)."""
    path = memo_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {**_read(path), key: float(sigma)})
    except OSError:
        pass
