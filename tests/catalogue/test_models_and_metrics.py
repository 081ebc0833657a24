"""Catalogue: a model file replaced by a malicious pickle; metrics breaking their contract."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tests.catalogue.conftest import expect_failure


class _Payload:
    """Unpickling this creates ``marker`` (stands for any code an attacker would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("stage, output", [("bounds", "metrics/bounds.json"), ("ltu", "metrics/ltu.json")])
@pytest.mark.parametrize("defender, model_file", [("logreg", "model.skops"), ("mlp", "model.safetensors")])
def test_model_file_replaced_by_pickle(ws: Path, tmp_path: Path, defender: str, model_file: str,
                                       stage: str, output: str) -> None:
    """Every stage that reads model files (bounds checks them; ltu loads them) refuses a pickle."""
    marker = tmp_path / "pwned"
    path = ws / "data" / "defenders" / defender / model_file
    assert path.is_file()
    path.write_bytes(pickle.dumps(_Payload(marker)))
    # sanity: the payload does run code when unpickled (so the test can fail)
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Payload(probe)))
    assert probe.exists()
    err = expect_failure(ws, stage, f"data/defenders/{defender}/{model_file}", "is a python pickle",
                         "refusing to load", absent=(output,))
    assert not marker.exists(), "the pickle's code ran"
    assert "refusing" in err


def test_ltu_metrics_out_of_range(ws: Path) -> None:
    (ws / "metrics").mkdir()
    bad = {"logreg": {"accuracy": 0.6, "privacy": 1.7, "privacy_stderr": 0.01, "utility": 0.9,
                      "utility_stderr": 0.01, "rounds": 20, "attacker": "loss_gap"}}
    (ws / "metrics" / "ltu.json").write_text(json.dumps(bad))
    (ws / "metrics" / "audit.json").write_text("{}")
    (ws / "metrics" / "bounds.json").write_text("{}")
    expect_failure(ws, "report", "validation suite 'metrics' failed", "logreg.privacy", "[0, 1]",
                   absent=("metrics/gate.json", "reports/audit.html"))


def test_ltu_metrics_missing_key(ws: Path) -> None:
    (ws / "metrics").mkdir()
    bad = {"logreg": {"accuracy": 0.6, "privacy": 0.7, "rounds": 20, "attacker": "loss_gap"}}
    (ws / "metrics" / "ltu.json").write_text(json.dumps(bad))
    expect_failure(ws, "bounds", "required ltu keys present", "logreg.privacy_stderr",
                   absent=("metrics/bounds.json",))


def test_canary_statistics_with_nan(ws: Path) -> None:
    """The lidp and game3 stages check their input statistics (GX suite 'canaries') before auditing."""
    import numpy as np

    (ws / "data" / "audit").mkdir(parents=True)
    (ws / "data" / "audit" / "game3.json").write_text("{}")
    folder = ws / "data" / "canaries" / "logreg"
    folder.mkdir(parents=True)
    loss_in = np.full((2, 1), 0.5)
    loss_in[1, 0] = np.nan
    np.savez(folder / "lidp.npz", loss_in=loss_in, loss_null=np.full((2, 1), 0.7))
    expect_failure(ws, "lidp", "validation suite 'canaries' failed", "loss_in", "offending rows [1]",
                   absent=("metrics/audit.json", "data/audit/epsilon_vs_trials"))
    proba = np.full((3, 3), 1 / 3)
    np.savez(folder / "game3.npz", canary_index=np.arange(3), true_label=np.zeros(3, int),
             label_pair=np.tile([1, 2], (3, 1)), bit=np.array([0, 1, 2]), proba=proba)
    (ws / "data" / "audit" / "game3.json").unlink()
    expect_failure(ws, "game3", "validation suite 'canaries' failed", "bit outcomes are 0/1",
                   absent=("data/audit/game3.json",))
