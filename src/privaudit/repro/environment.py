"""What outside the repository decides the pipeline's numbers: Python's version and the versions of
the packages that compute them (``data/environment.json``).

DVC hashes files; it cannot see that ``pip install -U opacus`` changed an accountant or that another
torch build changed the last bits of a trained model. The ``environment`` stage (``always_changed``,
the first with ``user_code`` on every ``dvc repro``) writes :func:`environment_manifest` as canonical
JSON, and every stage that computes lists ``data/environment.json`` as a dependency: the same
environment rewrites the same bytes and nothing reruns; an upgraded package reruns the whole
pipeline instead of serving results an older version computed. ``privaudit verdict`` compares the
recorded manifest with the running one (:func:`environment_changes`) and calls a gate computed under
other versions stale.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

ENVIRONMENT_FILE = "data/environment.json"

# the packages whose code computes or serialises a number the gate reads (dvc, prefect: orchestration only)
RESULT_PACKAGES = ("numpy", "scipy", "pandas", "scikit-learn", "torch", "opacus", "great-expectations", "skops",
                   "safetensors")


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """``{name: installed version}`` (``None`` when not installed); metadata only, nothing imported."""
    versions: dict[str, str | None] = {}
    for n in names:
        try:
            versions[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            versions[n] = None
    return versions


def environment_manifest() -> dict[str, Any]:
    """``{"python": "3.11.7", "packages": {name: version}}`` for :data:`RESULT_PACKAGES` (the torch
    version carries its build, e.g. ``2.13.0+cpu``).

    >>> m = environment_manifest()
    >>> sorted(m), m["packages"]["numpy"] is not None
    (['packages', 'python'], True)
    """
    return {"python": platform.python_version(), "packages": package_versions(RESULT_PACKAGES)}


def environment_changes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One line per difference between two manifests, e.g. ``"opacus 1.6.0 → 1.7.1"``.

    >>> environment_changes({"python": "3.11.7", "packages": {"opacus": "1.6.0", "numpy": "2.1.0"}},
    ...                     {"python": "3.11.7", "packages": {"opacus": "1.7.1", "numpy": "2.1.0"}})
    ['opacus 1.6.0 → 1.7.1']
    """
    lines = []
    if recorded.get("python") != now.get("python"):
        lines.append(f"python {recorded.get('python')} → {now.get('python')}")
    old, new = recorded.get("packages") or {}, now.get("packages") or {}
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            lines.append(f"{name} {old.get(name) or 'not installed'} → {new.get(name) or 'not installed'}")
    return lines
