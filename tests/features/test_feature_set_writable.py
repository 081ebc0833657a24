"""The feature set a stage loads hands torch writable arrays: no "The given NumPy array is not writable" warning.

Under pandas' copy-on-write, ``Series.to_numpy()`` of a column read from ``membership.parquet`` is a
read-only view; ``torch.as_tensor`` of it warns once per process (the LTU stage's log carried it, from
the reference models of its per-sample risk). torch suppresses the warning after its first time in a
process, so the warning itself is checked in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.data.split import MEMBERSHIP_FILE
from privaudit.features.feature_set import load_feature_set


def _files(tmp_path: Path) -> tuple[Path, Path]:
    features, split = tmp_path / "features", tmp_path / "split"
    features.mkdir()
    split.mkdir()
    rng = np.random.default_rng(0)
    ids = np.array([f"s{i}" for i in range(12)])
    np.savez(features / "features.npz", X=rng.random((12, 3), dtype=np.float32), ids=ids)
    (features / "meta.json").write_text('{"n_classes": 3}')
    pd.DataFrame({"id": ids, "label": np.arange(12, dtype=np.int64) % 3,
                  "role": np.where(np.arange(12) % 2 == 0, "defender", "reserved")}).to_parquet(
        split / MEMBERSHIP_FILE, index=False)
    return features, split


def test_every_array_of_the_loaded_feature_set_is_writable(tmp_path: Path) -> None:
    fs = load_feature_set(*_files(tmp_path))
    for name in ("X", "y", "ids", "is_defender"):
        assert getattr(fs, name).flags.writeable, name


def test_torch_gets_the_arrays_without_the_not_writable_warning(tmp_path: Path) -> None:
    """As the LTU reference models take them (``torch.as_tensor(np.asarray(y))``), with the warning an error."""
    features, split = _files(tmp_path)
    script = textwrap.dedent(f"""
        import numpy as np, torch
        from pathlib import Path
        from privaudit.features.feature_set import load_feature_set
        fs = load_feature_set(Path({str(features)!r}), Path({str(split)!r}))
        for arr in (fs.X, fs.y, fs.is_defender, *fs.defender, *fs.reserved):
            torch.as_tensor(np.asarray(arr))
    """)
    proc = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
