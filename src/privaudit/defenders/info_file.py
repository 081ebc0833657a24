"""The one reader of ``data/defenders/<name>/info.json``, validating what it reads.

The defenders stage writes one ``info.json`` per defender (:func:`privaudit.defenders.trained_files.train_release`:
the spec, its model file, the Defender/Reserved sizes, the claim in ``claimed_*`` keys, utility). Every
later reader — the audits (the claim), the audit merge (the whole record), the bounds stage (claim, η),
the plan stage (``n_defender``), the LTU audit and the model loader (``model_file``) — goes through
:func:`read_defender_info`, which refuses a missing, corrupt or inconsistent file with a message naming the
file and the key, before any work. :func:`check_defender_files` runs the model-file contract (no pickle;
:func:`privaudit.validation.model_files.check_model_file`) over the folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from privaudit.artifacts import read_json
from privaudit.validation.model_files import ModelFileError, check_model_file
from privaudit.verdict.claim_check import claim_of
from privaudit.claims.claim import PrivacyClaim

__all__ = ["INFO_FILE", "DefenderInfo", "check_defender_files", "read_defender_info"]

INFO_FILE = "info.json"


@dataclass(frozen=True)
class DefenderInfo:
    """One defender's ``info.json``, validated.

    Attributes:
        path: the file read.
        name: the defender (equal to its folder's name).
        model_file: the model file's name inside the defender's folder.
        n_defender: rows of the Defender set it was trained on.
        n_classes: classes of its outputs.
        claim: the ε claim of its ``claimed_*`` keys (``None``: it claims no ε).
        trusted_types: the spec's extra trusted skops types (a user's trainer), for the model-file check.
        raw: every key as written (read-only); the ``metrics/audit.json`` entry copies from it.
    """

    path: Path
    name: str
    model_file: str
    n_defender: int
    n_classes: int
    claim: PrivacyClaim | None
    trusted_types: tuple[str, ...]
    raw: Mapping[str, Any]

    @property
    def mip_eta(self) -> float | None:
        """The η an η-MIP recipe (``kind: mip``) claims instead of an ε (``None`` for every other kind)."""
        eta = self.raw.get("mip_eta")
        return None if eta is None else float(eta)


def _int(raw: Mapping[str, Any], key: str, minimum: int, path: Path) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{path}: {key} must be an integer >= {minimum}, got {value!r}; rerun the defenders stage")
    return value


def read_defender_info(defenders_dir: Path, name: str) -> DefenderInfo:
    """The validated ``<defenders_dir>/<name>/info.json``.

    Raises:
        FileNotFoundError: the file is missing (run the defenders stage).
        ValueError: it is not a JSON object, names another defender, lacks a key or has a bad value
            (the message names the file and the key); :class:`~privaudit.validation.ModelFileError` (a
            ``ValueError``) when ``model_file`` is not a plain file name in the folder.
    """
    path = Path(defenders_dir) / name / INFO_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; run the defenders stage (dvc repro defenders)")
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(raw).__name__}; rerun the defenders stage")
    if raw.get("name") != name:
        raise ValueError(f"{path}: name is {raw.get('name')!r}, expected {name!r} (the folder's defender); "
                         "rerun the defenders stage")
    model_file = raw.get("model_file")
    if not isinstance(model_file, str) or not model_file or Path(model_file).name != model_file:
        raise ModelFileError(f"{path}: model_file {model_file!r} must be a file name inside {path.parent}")
    spec = raw.get("spec") or {}
    trusted = spec.get("trusted_types") if isinstance(spec, dict) else None
    if trusted is not None and not (isinstance(trusted, list) and all(isinstance(t, str) for t in trusted)):
        raise ValueError(f"{path}: spec.trusted_types must be a list of type names, got {trusted!r}")
    return DefenderInfo(path=path, name=name, model_file=model_file, n_defender=_int(raw, "n_defender", 1, path),
                        n_classes=_int(raw, "n_classes", 2, path), claim=claim_of(raw, str(path)),
                        trusted_types=tuple(trusted or ()), raw=MappingProxyType(raw))


def check_defender_files(defenders_dir: Path, names: Iterable[str]) -> dict[str, str]:
    """Check every named defender's ``info.json`` and model file (model files are data, never code).

    Returns:
        name → model-file format (``skops``, ``safetensors``).

    Raises:
        FileNotFoundError, ValueError: as :func:`read_defender_info`.
        privaudit.validation.ModelFileError: a model file is not a safe model file (names it).
    """
    formats = {}
    for name in names:
        info = read_defender_info(defenders_dir, name)
        formats[name] = check_model_file(info.path.parent / info.model_file, info.trusted_types)
    return formats
