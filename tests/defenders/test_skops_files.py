"""skops model files are byte-reproducible (DVC hashes them) and load back to the same model."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import skops.io as sio
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from privaudit.defenders.skops_files import EPOCH, canonical_skops, dump_skops

SAVE = """
import sys
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from privaudit.defenders.skops_files import dump_skops
X, y = load_digits(return_X_y=True)
dump_skops(LogisticRegression(max_iter=200).fit(X[:300] / 16, y[:300]), sys.argv[1])
"""


def test_two_processes_write_identical_bytes(tmp_path: Path) -> None:
    """Object addresses differ between processes; the files must not."""
    paths = [tmp_path / f"m{i}.skops" for i in range(2)]
    for p in paths:
        subprocess.run([sys.executable, "-c", SAVE, str(p)], check=True)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    # the plain skops dump of the same model is not reproducible (what this module fixes)
    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=200).fit(X[:300] / 16, y[:300])
    assert sio.dumps(model) != sio.dumps(LogisticRegression(max_iter=200).fit(X[:300] / 16, y[:300]))


def test_canonical_archive_loads_to_the_same_model(tmp_path: Path) -> None:
    X, y = load_digits(return_X_y=True)
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X[:200], y[:200])
    path = tmp_path / "rf.skops"
    dump_skops(model, path)
    with zipfile.ZipFile(path) as z:
        assert all(info.date_time == EPOCH for info in z.infolist())
        names = sorted(n for n in z.namelist() if n != "schema.json")
        assert names == sorted(f"{i}.npy" for i in range(len(names)))
    back = sio.load(path, trusted=sio.get_untrusted_types(file=path))
    np.testing.assert_array_equal(back.predict_proba(X[200:260]), model.predict_proba(X[200:260]))
    assert canonical_skops(path.read_bytes()) == path.read_bytes()  # idempotent
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rf.skops"]  # no temporary file left behind
