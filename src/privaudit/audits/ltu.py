"""The ltu stage's library half: every defender through the LTU attackers (Pedersen et al. 2022, Eq. 1, 2).

:func:`ltu_audit` aligns each trained defender's outputs with the features (:func:`ltu_data`),
runs :func:`privaudit.attacks.ltu_evaluation.evaluate_defender` on its own random stream
``rng_for(seed, "ltu", name)`` and returns the ``metrics/ltu.json`` entries with the per-sample
scores and ROC data that :meth:`LtuAudit.write_outputs` stores under ``data/ltu``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.artifacts import write_json
from privaudit.attacks.ltu import LtuData
from privaudit.attacks.ltu_evaluation import AttackerOptions, DefenderEvaluation, evaluate_defender
from privaudit.attacks.sample_risk import RiskOptions
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.defenders.trained_files import load_trained_defender, read_defender_outputs
from privaudit.features.feature_set import FeatureSet
from privaudit.seeding import rng_for

__all__ = ["LtuAudit", "ltu_audit", "ltu_data"]


def ltu_data(defender_dir: Path, spec: DefenderSpecBase, fs: FeatureSet) -> LtuData:
    """A defender's outputs aligned with the features (row order of ``fs``); M_D loaded for white-box attackers."""
    outputs, _ = read_defender_outputs(defender_dir)
    frame = outputs.set_index(outputs["id"].astype(str)).loc[fs.ids]
    proba = frame[[f"p_{c}" for c in range(fs.n_classes)]].to_numpy(np.float64)
    model = load_trained_defender(defender_dir, spec, fs.n_classes, device="cpu")
    return LtuData(X=fs.X, y=fs.y, proba=proba, is_defender=fs.is_defender, ids=fs.ids,
                   train_rows=np.flatnonzero(fs.is_defender), n_classes=fs.n_classes, spec=spec, model=model)


@dataclass(frozen=True)
class LtuAudit:
    """``metrics/ltu.json`` entries and each defender's evaluation (scores, ROC data)."""

    metrics: dict[str, dict[str, Any]]
    evaluations: dict[str, DefenderEvaluation]

    def write_outputs(self, directory: Path) -> None:
        """``<name>.scores.parquet`` (per-sample scores and risk) and ``<name>.roc.json`` per defender."""
        for name, ev in self.evaluations.items():
            ev.scores.to_parquet(directory / f"{name}.scores.parquet", index=False)
            write_json(directory / f"{name}.roc.json", ev.roc)


def _summary(name: str, ev: DefenderEvaluation, entry: dict[str, Any]) -> list[str]:
    b = ev.best
    lines = [f"ltu: {name}: A_ltu={b.accuracy:.3f} privacy={b.privacy:.3f}±{b.privacy_stderr:.3f} ({b.attacker}), "
             f"utility={entry['utility']:.3f}, Theorem 1/2 bounds {ev.bounds['theorem1']:.3f}/{ev.bounds['theorem2']:.3f}"
             + ("  WARNING: below the theorem's lower bound" if entry["below_theorem_bound"] else "")]
    if ev.risk is not None:
        r = ev.risk.info
        lines.append(f"ltu: {name}: per-sample risk: {r['flagged']} of {r['tested']} Defender samples flagged "
                     f"({r['correction']} at {r['level']:g}, {r['reference_models']} reference models); negative "
                     f"control: {r['reserved_flagged']} of {r['reserved_tested']} Reserved samples at the same cutoff")
    return lines


def ltu_audit(
    specs: Sequence[DefenderSpecBase], *, defenders_dir: Path, features: FeatureSet, rounds: int, attackers: Sequence[str],
    options: AttackerOptions, risk: RiskOptions | None, seed: int, log: Callable[[str], None] = print,
) -> LtuAudit:
    """Play ``rounds`` LTU rounds per attacker against every defender in ``specs`` (validated defender specs).

    ``defenders_dir`` holds the defenders stage's outputs (``<name>/outputs.parquet``, ``info.json``,
    the model); ``risk`` (None: off) adds the per-sample privacy risk; ``log`` gets one line per
    attacker as it finishes and a summary per defender.
    """
    metrics: dict[str, dict[str, Any]] = {}
    evaluations: dict[str, DefenderEvaluation] = {}
    for spec in specs:
        name = spec.name
        _, info = read_defender_outputs(defenders_dir / name)
        data = ltu_data(defenders_dir / name, spec, features)
        ev = evaluate_defender(data, rounds, list(attackers), rng_for(seed, "ltu", name), options, risk,
                               progress=lambda line, name=name: log(f"ltu: {name}: {line}"))
        metrics[name] = ev.metrics(info["utility"], info["utility_stderr"])
        evaluations[name] = ev
        for line in _summary(name, ev, metrics[name]):
            log(line)
    return LtuAudit(metrics, evaluations)
