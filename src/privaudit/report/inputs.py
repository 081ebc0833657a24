"""What the report is built from: :class:`ReportInputs`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from privaudit.claims.ledger import Release
from privaudit.verdict.metrics_files import AuditMetrics, GateResult

__all__ = ["ReportInputs"]

PRIVACY_SCORE_COLUMNS: tuple[str, ...] = ("id", "role", "score")
EPSILON_TRIALS_COLUMNS: tuple[str, ...] = ("trials", "eps_k1", "eps_ksqrt")
ROC_KEYS: tuple[str, ...] = ("fpr", "tpr")


@dataclass
class ReportInputs:
    """Everything the report shows. Only the metrics are required; absent optional parts render as
    "not computed in this audit".

    Attributes:
        metrics: ``metrics/ltu.json``, ``metrics/audit.json``, ``metrics/bounds.json``, typed
            (:func:`privaudit.verdict.metrics_files.read_metrics`).
        gate: the release gate's verdict (:func:`privaudit.verdict.gate.evaluate_gate`); ``None``
            renders as "no verdict".
        manifest: provenance (code revision, upstream dvc.lock hash, params, data hashes, versions, ...).
        privacy_scores: per defender, a DataFrame with columns ``id, role, score``
            (individual LTU privacy scores; ids only, never raw data).
        roc: per defender, per attacker: ``{fpr, tpr, auc, tpr_at_0_1pct, tpr_at_1pct}``.
        epsilon_vs_trials: per defender, a DataFrame with columns ``trials, eps_k1, eps_ksqrt``.
        table1: the LTU Table 1 reproduction (columns model, randomness, utility, privacy, and
            optionally utility_stderr, privacy_stderr, trials, rounds): one DataFrame, or one per
            data set keyed by its name.
        table1_left_out: names of the Table 1 reproductions listed in ``report.table1`` but not
            shown because they belong to another data set than ``dataset`` (the report says so).
        dataset: the audited data set (``dataset.name``).
        releases: the ledger's earlier releases of the audited data set identity (``releases.yaml``), oldest
            first; the gate's ``ledger`` block holds their composition under ``gate.total_budget``.
    """

    metrics: AuditMetrics
    gate: GateResult | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    privacy_scores: dict[str, pd.DataFrame] | None = None
    roc: dict[str, dict[str, dict[str, Any]]] | None = None
    epsilon_vs_trials: dict[str, pd.DataFrame] | None = None
    table1: pd.DataFrame | dict[str, pd.DataFrame] | None = None
    table1_left_out: tuple[str, ...] = ()
    dataset: str | None = None
    releases: tuple[Release, ...] = ()

    def __post_init__(self) -> None:
        """Validate types and the columns of the optional tables (``ValueError`` naming them)."""
        if not isinstance(self.manifest, Mapping):
            raise ValueError(f"ReportInputs.manifest must be a dict, got {type(self.manifest).__name__}")
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
        names = self.metrics.defenders() + list(self.gate.defenders if self.gate else {})
        for extra in (self.privacy_scores, self.roc, self.epsilon_vs_trials):
            names += [str(name) for name in extra or {}]
        return list(dict.fromkeys(names))


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
