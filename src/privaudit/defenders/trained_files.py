"""What the defenders stage records per defender, and reading it back.

For each defender, ``data/defenders/<name>/`` holds the model file (skops/safetensors), the
per-sample outputs on Defender and Reserved data (``outputs.parquet``: loss and probability
vector) and ``info.json`` (kind, claimed ε, determinism, utility by Eq. 2 of Pedersen et al. 2022);
for an observable defender (``kind: dp_sgd``, ``kind: python`` with ``observable: true``) also what
:mod:`privaudit.hooks` saw in the release run (:mod:`privaudit.defenders.release_watch`:
``release_watch.json``, ``release_observations.npz``), pooled by the white-box audit.
:func:`train_one` trains one defender and returns the three; :func:`train_release` trains it as the
defenders stage does (observable ones watched; :class:`TrainedDefender`); :func:`write_defender` writes them;
:func:`read_defender_outputs` and :func:`load_trained_defender` read them back (the model file
checked first: :func:`privaudit.validation.model_files.check_model_file`).
"""

from __future__ import annotations

import decimal
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privaudit.artifacts import dumps_json
from privaudit.defenders.base import Defender
from privaudit.losses import cross_entropy
from privaudit.defenders.registry import make_defender
from privaudit.defenders.release_watch import ReleaseWatch, record_release, release_canary_seed, write_release_watch
from privaudit.defenders.specs import DefenderSpecBase, PythonSpec
from privaudit.features.feature_set import FeatureSet
from privaudit.seeding import int_seed
from privaudit.stats import ltu_utility
from privaudit.defenders.info_file import INFO_FILE, read_defender_info
from privaudit.validation.model_files import check_model_file

OUTPUTS_FILE = "outputs.parquet"


def per_sample_outputs(model: Defender[Any], fs: FeatureSet) -> pd.DataFrame:
    """Per-sample outputs on all samples: id, role, label, loss, correct, p_0..p_{C−1}."""
    proba = model.predict_proba(fs.X)
    if proba.shape != (len(fs.y), fs.n_classes):
        raise ValueError(f"defender {model.name!r} returned probabilities of shape {proba.shape}, "
                         f"expected {(len(fs.y), fs.n_classes)}")
    frame = pd.DataFrame({
        "id": fs.ids,
        "role": np.where(fs.is_defender, "defender", "reserved"),
        "label": fs.y,
        "loss": cross_entropy(proba, fs.y),
        "correct": proba.argmax(axis=1) == fs.y,
    })
    probs = pd.DataFrame(proba, columns=[f"p_{c}" for c in range(fs.n_classes)])
    return pd.concat([frame, probs], axis=1)


#: significant digits of the ε claim recorded in info.json (see :func:`round_claim`)
CLAIM_DIGITS = 6


def round_claim(eps: float | None, digits: int = CLAIM_DIGITS) -> float | None:
    """ε rounded *up* to ``digits`` significant digits (None, 0 and inf unchanged).

    Accountants (opacus PRV for ``dp_sgd``) evaluate with numpy/scipy kernels that numpy picks
    by CPU at run time (AVX-512 vs AVX2): the same claim differs across machines in the 10th
    digit, which rewrote info.json, dvc.lock and metrics/audit.json on every other machine.
    Rounding up keeps the recorded claim a valid guarantee (ε-DP implies ε'-DP for ε' >= ε).

    >>> round_claim(0.9970044961694864), round_claim(0.9970044962689115), round_claim(1.0)
    (0.997005, 0.997005, 1.0)
    """
    if eps is None or not math.isfinite(eps) or eps <= 0:
        return eps
    d = decimal.Decimal(repr(float(eps)))
    step = decimal.Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(step, rounding=decimal.ROUND_CEILING))


def train_one(spec: DefenderSpecBase, fs: FeatureSet, seed: int,
              device: str) -> tuple[Defender[Any], pd.DataFrame, dict[str, Any]]:
    """Train the defender ``spec`` on the Defender set; return model, outputs, info (no recording)."""
    t = train_release(spec, fs, seed, device, canary_scale=None)
    return t.model, t.outputs, t.info


@dataclass(frozen=True)
class TrainedDefender:
    """One defender as the defenders stage trained it: the released model, its per-sample outputs,
    its ``info.json`` and, for an observable defender trained under a recording, the :class:`ReleaseWatch`."""

    model: Defender[Any]
    outputs: pd.DataFrame
    info: dict[str, Any]
    watch: ReleaseWatch | None = None
    fit_seconds: float = 0.0  # wall time of the fit alone (the plan stage's seconds per fit; not in info.json)


def train_release(spec: DefenderSpecBase, fs: FeatureSet, seed: int, device: str, *,
                  canary_scale: float | None) -> TrainedDefender:
    """Train the defender ``spec`` on the Defender set, as released; watch it if it is observable.

    With ``canary_scale`` (``whitebox.canary_scale``) an observable defender (``spec.observable_training()``)
    is fitted inside :func:`privaudit.hooks.recording` with the canary seed
    :func:`~privaudit.defenders.release_watch.release_canary_seed`; the shadow canary leaves the
    released model bit-identical to an unwatched fit. ``None``, or a defender that is not observable:
    no recording, ``watch`` is ``None``. The fit seed is ``int_seed(seed, "defenders", spec.name)`` either way.
    """
    model = make_defender(spec, n_classes=fs.n_classes, device=device)
    Xd, yd = fs.defender
    fit_seed = int_seed(seed, "defenders", spec.name)
    watch = None
    target = getattr(spec, "target", None)
    if isinstance(target, str):  # import the user's module (and what it imports) before the fit is timed
        from privaudit.defenders.user_target import resolve_target

        resolve_target(target)
    start = time.perf_counter()
    if canary_scale is not None and spec.observable_training():
        _, watch = record_release(lambda: model.fit(Xd, yd, seed=fit_seed),  # fit returns the defender itself
                                      seed=release_canary_seed(seed, spec.name), canary_scale=canary_scale)
    else:
        model.fit(Xd, yd, seed=fit_seed)
    fit_seconds = time.perf_counter() - start
    outputs = per_sample_outputs(model, fs)
    res = outputs[outputs["role"] == "reserved"]
    acc = float(res["correct"].mean())
    utility, utility_err = ltu_utility(acc, fs.n_classes, len(res))
    info = {
        **model.describe(),
        "model_file": f"model{model.model_suffix}",
        "n_classes": fs.n_classes,
        "n_defender": int(fs.is_defender.sum()),
        "n_reserved": int((~fs.is_defender).sum()),
        "train_accuracy": float(outputs.loc[outputs["role"] == "defender", "correct"].mean()),
        "test_accuracy": acc,
        "utility": utility,
        "utility_stderr": utility_err,
    }
    if "claimed_epsilon" in info:
        info["claimed_epsilon"] = round_claim(info["claimed_epsilon"])
    return TrainedDefender(model, outputs, info, watch, fit_seconds)


def write_defender(out_dir: Path, model: Defender[Any], outputs: pd.DataFrame, info: dict[str, Any],
                   watch: ReleaseWatch | None = None) -> None:
    """Write model, outputs and info into ``out_dir`` (a temporary dir of the stage), and the
    release run's :class:`ReleaseWatch` when there is one."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save(out_dir / info["model_file"])
    outputs.to_parquet(out_dir / OUTPUTS_FILE, index=False)
    (out_dir / INFO_FILE).write_text(dumps_json(info))
    if watch is not None:
        write_release_watch(out_dir, watch)


def read_defender_outputs(defender_dir: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read ``outputs.parquet`` and ``info.json`` of one trained defender."""
    info = read_defender_info(defender_dir.parent, defender_dir.name)
    out_path = defender_dir / OUTPUTS_FILE
    if not out_path.is_file():
        raise FileNotFoundError(f"{defender_dir} lacks {OUTPUTS_FILE}; run the defenders stage")
    return pd.read_parquet(out_path), dict(info.raw)


def load_trained_defender(defender_dir: Path, spec: DefenderSpecBase, n_classes: int,
                          device: str = "cpu") -> Defender[Any]:
    """Load the model the defenders stage wrote for ``spec``, refusing anything that could run code.

    The file named by ``info.json`` is checked first (a pickle is refused by its first byte, a
    skops file may hold only allow-listed types, safetensors headers must parse), then loaded.

    Raises:
        privaudit.validation.ModelFileError: the file is not a safe model file (names it).
    """
    info = read_defender_info(defender_dir.parent, defender_dir.name)
    path = defender_dir / info.model_file
    check_model_file(path, spec.trusted_types if isinstance(spec, PythonSpec) else ())
    return make_defender(spec, n_classes=n_classes, device=device).load(path)
