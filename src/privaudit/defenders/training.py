"""Train every defender of ``params.defenders`` and record what the audits need.

For each defender, ``data/defenders/<name>/`` holds the model file (skops/safetensors), the
per-sample outputs on Defender and Reserved data (loss and probability vector) and
``info.json`` (kind, claimed ε, determinism, utility by Eq. 2 of Pedersen et al. 2022).
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privaudit.artifacts import dumps_json
from privaudit.defenders.base import Defender, cross_entropy
from privaudit.defenders.registry import make_defender
from privaudit.seeding import int_seed
from privaudit.stats import ltu_utility

OUTPUTS_FILE = "outputs.parquet"
INFO_FILE = "info.json"


@dataclass(frozen=True)
class FeatureSet:
    """Features aligned with the membership table.

    Attributes:
        X: (n, d) float32 embeddings.
        y: (n,) int64 labels.
        ids: (n,) str sample ids.
        is_defender: (n,) bool, True for Defender (training) samples.
        n_classes: number of classes C.
    """

    X: np.ndarray
    y: np.ndarray
    ids: np.ndarray
    is_defender: np.ndarray
    n_classes: int

    @property
    def defender(self) -> tuple[np.ndarray, np.ndarray]:
        return self.X[self.is_defender], self.y[self.is_defender]

    @property
    def reserved(self) -> tuple[np.ndarray, np.ndarray]:
        return self.X[~self.is_defender], self.y[~self.is_defender]


def align_features(
    X: np.ndarray, feature_ids: np.ndarray, membership: pd.DataFrame, n_classes: int
) -> FeatureSet:
    """Join features (by id) with the membership table (id, label, role); ids must match exactly."""
    ids = np.asarray(feature_ids).astype(str)
    if len(ids) != len(X):
        raise ValueError(f"features have {len(X)} rows but {len(ids)} ids")
    m = membership.set_index("id")
    missing = np.setdiff1d(ids, m.index.to_numpy().astype(str))
    extra = np.setdiff1d(m.index.to_numpy().astype(str), ids)
    if len(missing) or len(extra):
        raise ValueError(
            f"features and membership table disagree on ids: {len(missing)} feature ids not in the split "
            f"(e.g. {missing[:3].tolist()}), {len(extra)} split ids without features (e.g. {extra[:3].tolist()})"
        )
    rows = m.loc[ids]
    return FeatureSet(
        X=np.ascontiguousarray(X, dtype=np.float32),
        y=rows["label"].to_numpy(dtype=np.int64),
        ids=ids,
        is_defender=(rows["role"].to_numpy() == "defender"),
        n_classes=n_classes,
    )


def per_sample_outputs(model: Defender, fs: FeatureSet) -> pd.DataFrame:
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


def train_one(spec: dict[str, Any], fs: FeatureSet, seed: int, device: str) -> tuple[Defender, pd.DataFrame, dict[str, Any]]:
    """Train the defender ``spec`` on the Defender set; return model, outputs, info."""
    model = make_defender(spec, n_classes=fs.n_classes, device=device)
    Xd, yd = fs.defender
    model.fit(Xd, yd, seed=int_seed(seed, "defenders", spec["name"]))
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
    return model, outputs, info


def write_defender(out_dir: Path, model: Defender, outputs: pd.DataFrame, info: dict[str, Any]) -> None:
    """Write model, outputs and info into ``out_dir`` (a temporary dir of the stage)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save(out_dir / info["model_file"])
    outputs.to_parquet(out_dir / OUTPUTS_FILE, index=False)
    (out_dir / INFO_FILE).write_text(dumps_json(info))


def read_defender_outputs(defender_dir: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read ``outputs.parquet`` and ``info.json`` of one trained defender."""
    import json

    info_path = defender_dir / INFO_FILE
    out_path = defender_dir / OUTPUTS_FILE
    if not info_path.is_file() or not out_path.is_file():
        raise FileNotFoundError(f"{defender_dir} lacks {INFO_FILE} or {OUTPUTS_FILE}; run the defenders stage")
    return pd.read_parquet(out_path), json.loads(info_path.read_text())


def read_feature_files(features_dir: Path, split_dir: Path) -> tuple[np.ndarray, np.ndarray, dict[str, Any], pd.DataFrame]:
    """Read ``features.npz`` (X (n, d), ids (n,)), ``meta.json`` and ``membership.parquet``.

    Raises:
        FileNotFoundError: a file is missing (names it and the stage that writes it).
        ValueError: a file is truncated or corrupt (names it); nothing is unpickled.
    """
    import json
    import zipfile

    fpath, mpath, spath = features_dir / "features.npz", features_dir / "meta.json", split_dir / "membership.parquet"
    for p in (fpath, mpath, spath):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (run the featurize and split stages: dvc repro)")
    try:
        with np.load(fpath, allow_pickle=False) as z:
            X, ids = z["X"], z["ids"]
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise ValueError(f"{fpath} is truncated or corrupt: {err}") from None
    try:
        membership = pd.read_parquet(spath)
    except Exception as err:  # pyarrow raises several types for a truncated/corrupt file
        raise ValueError(f"{spath} is truncated or corrupt: {err}") from None
    try:
        meta = json.loads(mpath.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{mpath} is not valid JSON ({err.msg}); the file is corrupt") from None
    return X, ids, meta, membership


def load_feature_set(features_dir: Path, split_dir: Path) -> FeatureSet:
    """Read the featurize and split outputs into a :class:`FeatureSet` (see :func:`read_feature_files`)."""
    X, ids, meta, membership = read_feature_files(features_dir, split_dir)
    return align_features(X, ids, membership, int(meta["n_classes"]))


def load_trained_defender(defender_dir: Path, spec: dict[str, Any], n_classes: int, device: str = "cpu") -> Defender:
    """Load the model the defenders stage wrote for ``spec``, refusing anything that could run code.

    The file named by ``info.json`` is checked first (a pickle is refused by its first byte, a
    skops file may hold only allow-listed types, safetensors headers must parse), then loaded.

    Raises:
        privaudit.validation.ModelFileError: the file is not a safe model file (names it).
    """
    import json

    from privaudit.validation.model_files import check_model_file

    info = json.loads((defender_dir / INFO_FILE).read_text())
    path = defender_dir / info["model_file"]
    check_model_file(path, spec.get("trusted_types") or ())
    return make_defender(spec, n_classes=n_classes, device=device).load(path)
