"""The one reader of the canaries stage's outputs, ``data/canaries/<defender>/`` (written by
:func:`privaudit.canaries.assembly.write_defender_outputs`): ``game3.npz``, ``lidp.npz`` and ``blackbox.npz``,
each checked by the GX ``canaries`` suite as it is read (:func:`privaudit.validation.validate_canary_stats`),
and ``meta.json``. Every audit that reads canary statistics reads them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from privaudit.artifacts import read_json

__all__ = ["CANARY_FILES", "SCORE_LIMIT", "UnusableScores", "read_canary_meta", "read_canary_stats", "unusable_reason"]

Experiment = Literal["game3", "lidp", "blackbox"]
#: the statistics file of each experiment inside ``data/canaries/<defender>/``
CANARY_FILES: dict[str, str] = {"game3": "game3.npz", "lidp": "lidp.npz", "blackbox": "blackbox.npz"}


#: largest magnitude of a score, loss or statistic an audit accepts. The canaries' scores are log-probability
#: differences (at most ~700 in float64); anything beyond this comes from a trainer whose outputs are not
#: probabilities, and squares or sums of such values overflow float64 (1e300² = inf) inside the statistics.
SCORE_LIMIT = 1e100


class UnusableScores(ValueError):
    """A defender's canary scores cannot be audited (non-finite or beyond :data:`SCORE_LIMIT`); the message is
    one line naming the defender, the experiment and what was found. The audit then records the defender as
    NOT AUDITED instead of failing the pipeline (:func:`privaudit.audits.runner.run_audit`)."""


def unusable_reason(arrays: dict[str, np.ndarray], experiment: str, defender: str | None = None) -> str | None:
    """Why ``arrays`` (one experiment's statistics) cannot be audited, in one line (naming ``defender`` when
    given); None when they can.

    >>> unusable_reason({"score": np.array([0.5, np.nan, np.inf]), "included": np.array([1, 0, 1])}, "blackbox", "mine")
    "defender 'mine': 2 of 3 blackbox scores are not finite (nan, inf): its predict_proba returned no probabilities"
    >>> unusable_reason({"loss_in": np.array([1e300, 2.0]), "loss_null": np.array([1.0])}, "lidp", "mine") is None
    False
    >>> unusable_reason({"score": np.array([0.5, -3.0]), "included": np.array([1, 0])}, "blackbox", "mine") is None
    True
    """
    for key, values in sorted(arrays.items()):
        a = np.asarray(values)
        if a.dtype.kind != "f" or a.size == 0:
            continue
        who = "" if defender is None else f"defender {defender!r}: "
        bad = ~np.isfinite(a)
        if bad.any():
            kinds = ", ".join(sorted({"nan" if np.isnan(v) else "inf" for v in a[bad].ravel()[:64]}))
            return (f"{who}{int(bad.sum())} of {a.size} {experiment} {_noun(key)} are not finite "
                    f"({kinds}): its predict_proba returned no probabilities")
        big = np.abs(a) > SCORE_LIMIT
        if big.any():
            return (f"{who}{int(big.sum())} of {a.size} {experiment} {_noun(key)} exceed "
                    f"{SCORE_LIMIT:g} in magnitude (largest {float(np.abs(a).max()):.3g}): its outputs are not "
                    f"probabilities")
    return None


def _noun(key: str) -> str:
    return {"score": "scores", "proba": "probabilities"}.get(key, f"{key} values")


def read_canary_stats(path: Path, experiment: Experiment) -> dict[str, np.ndarray]:
    """The arrays of one statistics file (``<canaries>/<defender>/<experiment>.npz``), validated.

    Raises:
        UnusableScores: the canaries stage found the defender's scores unusable (``meta.json``'s ``unusable``).
        FileNotFoundError: the file is missing (the message names it and says to run the canaries stage).
        privaudit.validation.ValidationFailed: the arrays are not sound statistics of ``experiment``.
    """
    from privaudit.validation import validate_canary_stats

    path = Path(path)
    unusable = (read_canary_meta(path.parent).get("unusable") or {}) if path.parent.is_dir() else {}
    if experiment in unusable:
        raise UnusableScores(str(unusable[experiment]))
    if not path.is_file():
        if experiment == "blackbox":
            raise FileNotFoundError(f"{path} is missing: the canaries stage ran without black-box runs for defender "
                                    f"{path.parent.name!r}; rerun it (dvc repro canaries)")
        raise FileNotFoundError(f"{path} not found (run the canaries stage)")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    validate_canary_stats(experiment, arrays)  # GX suite 'canaries' on the input
    return arrays


def read_canary_meta(folder: Path) -> dict[str, Any]:
    """``<canaries>/<defender>/meta.json``: the canaries' sizes and, with black-box runs, the crafted canary
    (``blackbox``: its description, scale, label and the Defender-set size ``n_train``); ``{}`` when absent."""
    path = Path(folder) / "meta.json"
    meta = read_json(path) if path.is_file() else {}
    if not isinstance(meta, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(meta).__name__}: rerun the canaries stage")
    return meta
