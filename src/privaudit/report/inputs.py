"""What the report is built from: :class:`ReportInputs` and helpers to load it from files."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["ReportInputs", "read_metrics_json", "strongest_attacker"]

PRIVACY_SCORE_COLUMNS: tuple[str, ...] = ("id", "role", "score")
EPSILON_TRIALS_COLUMNS: tuple[str, ...] = ("trials", "eps_k1", "eps_ksqrt")
ROC_KEYS: tuple[str, ...] = ("fpr", "tpr")


@dataclass
class ReportInputs:
    """Everything the report shows. Only the metrics dicts are required; absent optional
    parts render as "not computed in this audit".

    Attributes:
        ltu: ``metrics/ltu.json``.
        audit: ``metrics/audit.json``.
        bounds: ``metrics/bounds.json``.
        gate: ``metrics/gate.json`` (the output of :func:`evaluate_gate`).
        manifest: provenance (code revision, upstream dvc.lock hash, params, data hashes, versions, ...).
        privacy_scores: per defender, a DataFrame with columns ``id, role, score``
            (individual LTU privacy scores; ids only, never raw data).
        roc: per defender, per attacker: ``{fpr, tpr, auc, tpr_at_0_1pct, tpr_at_1pct}``.
        epsilon_vs_trials: per defender, a DataFrame with columns ``trials, eps_k1, eps_ksqrt``.
        table1: the LTU Table 1 reproduction (columns model, randomness, utility, privacy, and
            optionally utility_stderr, privacy_stderr, trials, rounds): one DataFrame, or one per
            data set keyed by its name.
    """

    ltu: dict[str, Any]
    audit: dict[str, Any]
    bounds: dict[str, Any]
    gate: dict[str, Any]
    manifest: dict[str, Any] = field(default_factory=dict)
    privacy_scores: dict[str, pd.DataFrame] | None = None
    roc: dict[str, dict[str, dict[str, Any]]] | None = None
    epsilon_vs_trials: dict[str, pd.DataFrame] | None = None
    table1: pd.DataFrame | dict[str, pd.DataFrame] | None = None

    def __post_init__(self) -> None:
        """Validate types and the columns of the optional tables (``ValueError`` naming them)."""
        for name in ("ltu", "audit", "bounds", "gate", "manifest"):
            value = getattr(self, name)
            if value is None:
                setattr(self, name, {})
            elif not isinstance(value, Mapping):
                raise ValueError(f"ReportInputs.{name} must be a dict, got {type(value).__name__}")
        _check_frames("privacy_scores", self.privacy_scores, PRIVACY_SCORE_COLUMNS)
        _check_frames("epsilon_vs_trials", self.epsilon_vs_trials, EPSILON_TRIALS_COLUMNS)
        if self.roc is not None:
            if not isinstance(self.roc, Mapping):
                raise ValueError(f"ReportInputs.roc must be a dict, got {type(self.roc).__name__}")
            for defender, per_attacker in self.roc.items():
                if not isinstance(per_attacker, Mapping):
                    raise ValueError(f"ReportInputs.roc[{defender!r}] must be a dict of attackers")
                for attacker, curve in per_attacker.items():
                    where = f"ReportInputs.roc[{defender!r}][{attacker!r}]"
                    if not isinstance(curve, Mapping):
                        raise ValueError(f"{where} must be a dict with fpr and tpr")
                    for key in ROC_KEYS:
                        if key not in curve:
                            raise ValueError(f"{where} has no {key!r}")
                    if len(curve["fpr"]) != len(curve["tpr"]):
                        raise ValueError(
                            f"{where}: fpr and tpr differ in length "
                            f"({len(curve['fpr'])} vs {len(curve['tpr'])})"
                        )
        if self.table1 is not None and not isinstance(self.table1, pd.DataFrame):
            if not isinstance(self.table1, Mapping):
                raise ValueError(
                    "ReportInputs.table1 must be a pandas DataFrame or a dict of them, "
                    f"got {type(self.table1).__name__}"
                )
            for name, frame in self.table1.items():
                if not isinstance(frame, pd.DataFrame):
                    raise ValueError(
                        f"ReportInputs.table1[{name!r}] must be a pandas DataFrame, got {type(frame).__name__}"
                    )

    def table1_by_dataset(self) -> dict[str, pd.DataFrame]:
        """The Table 1 reproductions keyed by data set ("" for a single unnamed one)."""
        if self.table1 is None:
            return {}
        if isinstance(self.table1, pd.DataFrame):
            return {"": self.table1}
        return dict(self.table1)

    def defenders(self) -> list[str]:
        """Defender names over all metrics and optional tables, in first-seen order."""
        names: dict[str, None] = {}
        sources: list[Mapping[str, Any]] = [
            self.ltu,
            self.audit,
            self.bounds,
            self.gate.get("defenders") or {},
        ]
        for extra in (self.privacy_scores, self.roc, self.epsilon_vs_trials):
            if extra:
                sources.append(extra)
        for source in sources:
            for name in source:
                names.setdefault(str(name), None)
        return list(names)


def _check_frames(
    name: str, frames: Mapping[str, pd.DataFrame] | None, columns: tuple[str, ...]
) -> None:
    """Raise ``ValueError`` unless ``frames`` maps names to DataFrames with ``columns``."""
    if frames is None:
        return
    if not isinstance(frames, Mapping):
        raise ValueError(f"ReportInputs.{name} must be a dict of DataFrames")
    for key, frame in frames.items():
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(
                f"ReportInputs.{name}[{key!r}] must be a pandas DataFrame, "
                f"got {type(frame).__name__}"
            )
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(
                f"ReportInputs.{name}[{key!r}] lacks column(s) {missing}; expected {list(columns)}"
            )


def read_metrics_json(path: str | Path, *, required: bool = True) -> dict[str, Any]:
    """Read one metrics JSON object.

    Args:
        path: the file.
        required: if false, a missing file gives ``{}`` (the section renders as not computed).

    Raises:
        ValueError: the file is missing (when required), not JSON, or not a JSON object;
            the message names the file.
    """
    path = Path(path)
    if not path.exists():
        if required:
            raise ValueError(f"metrics file {path} does not exist")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"metrics file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"metrics file {path} must hold a JSON object, got {type(data).__name__}")
    return data


def strongest_attacker(entry: Mapping[str, Any] | None) -> str | None:
    """Name of the strongest attacker of one ``metrics/ltu.json`` entry.

    The top-level ``attacker`` if given, else the attacker with the lowest privacy.
    """
    if not entry:
        return None
    if entry.get("attacker") is not None:
        return str(entry["attacker"])
    attackers = entry.get("attackers")
    if not isinstance(attackers, Mapping):
        return None
    best: tuple[float, str] | None = None
    for name, sub in attackers.items():
        privacy = sub.get("privacy") if isinstance(sub, Mapping) else None
        if isinstance(privacy, (int, float)) and not isinstance(privacy, bool):
            if math.isfinite(privacy) and (best is None or privacy < best[0]):
                best = (float(privacy), str(name))
    return best[1] if best else None
