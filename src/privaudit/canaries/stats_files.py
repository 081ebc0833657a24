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

__all__ = ["CANARY_FILES", "read_canary_meta", "read_canary_stats"]

Experiment = Literal["game3", "lidp", "blackbox"]
#: the statistics file of each experiment inside ``data/canaries/<defender>/``
CANARY_FILES: dict[str, str] = {"game3": "game3.npz", "lidp": "lidp.npz", "blackbox": "blackbox.npz"}


def read_canary_stats(path: Path, experiment: Experiment) -> dict[str, np.ndarray]:
    """The arrays of one statistics file (``<canaries>/<defender>/<experiment>.npz``), validated.

    Raises:
        FileNotFoundError: the file is missing (the message names it and says to run the canaries stage).
        privaudit.validation.ValidationFailed: the arrays are not sound statistics of ``experiment``.
    """
    from privaudit.validation import validate_canary_stats

    path = Path(path)
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
