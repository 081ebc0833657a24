"""Model files are byte-reproducible, so a forced rerun does not rewrite dvc.lock.

safetensors keeps its ``__metadata__`` in a Rust HashMap whose order is randomised per process;
:func:`privaudit.artifacts.write_safetensors` writes the keys sorted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save

from privaudit.artifacts import canonical_safetensors, write_safetensors
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.validation.model_files import check_model_file

def _header(data: bytes) -> bytes:
    return data[8:8 + int.from_bytes(data[:8], "little")]


def _fitted(kind: str):  # type: ignore[no-untyped-def]
    raw = {"name": "m", "kind": kind, "hidden": [4], "epochs": 1, "batch_size": 8}
    if kind == "dp_sgd":
        raw.update(epsilon=4.0, accountant="rdp")
    spec = validate_defender_spec(raw)
    X = np.random.default_rng(0).random((40, 5)).astype(np.float32)
    model = make_defender(spec, n_classes=3)
    return spec, X, model.fit(X, np.arange(40) % 3, seed=1)


@pytest.mark.parametrize("kind", ["torch_mlp", "dp_sgd"])
def test_two_saves_of_the_same_model_are_byte_identical(kind: str, tmp_path: Path) -> None:
    """Every safetensors save draws a new HashMap order, even within one process: with the raw
    ``save_file`` 12 saves of a 2-key metadata agree with probability 2^-11."""
    spec, X, model = _fitted(kind)
    paths = [tmp_path / f"model{i}.safetensors" for i in range(12)]
    for p in paths:
        model.save(p)
    first = paths[0].read_bytes()
    assert all(p.read_bytes() == first for p in paths[1:])
    assert _header(first).startswith(b'{"__metadata__":{"d_in":"5","n_classes":"3"}')
    assert check_model_file(paths[0]) == "safetensors"
    _, _, again = _fitted(kind)  # the same training (CPU, same seed) gives the same file
    again.save(tmp_path / "again.safetensors")
    assert (tmp_path / "again.safetensors").read_bytes() == first
    back = make_defender(spec, n_classes=3).load(paths[0])
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


def test_canonical_safetensors_sorts_metadata_and_keeps_tensors(tmp_path: Path) -> None:
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a.bias": torch.ones(3, dtype=torch.float64)}
    meta = {f"k{i}": f"v{i}" for i in (5, 1, 9, 3, 7)} | {"ünï": "cödé"}
    data = save(tensors, metadata=meta)
    canon = canonical_safetensors(data)
    assert canonical_safetensors(canon) == canon  # idempotent
    n = int.from_bytes(canon[:8], "little")
    assert n % 8 == 0 and canon[8 + n:] == data[8 + int.from_bytes(data[:8], "little"):]
    write_safetensors(tmp_path / "m.safetensors", data)
    assert (tmp_path / "m.safetensors").read_bytes() == canon
    with safe_open(str(tmp_path / "m.safetensors"), "pt") as f:
        assert f.metadata() == meta
    back = load_file(str(tmp_path / "m.safetensors"))
    for k, v in tensors.items():
        assert torch.equal(back[k], v) and back[k].dtype == v.dtype
    header = _header(canon).decode().rstrip(" ")
    assert header.index('"k1"') < header.index('"k3"') < header.index('"k9"') < header.index('"ünï"')
    # no metadata at all: unchanged layout, still valid
    plain = canonical_safetensors(save(tensors))
    assert b"__metadata__" not in plain and torch.equal(load_file(_write(tmp_path / "p.safetensors", plain))["w"],
                                                         tensors["w"])
    with pytest.raises(ValueError, match="not a safetensors file"):
        canonical_safetensors(b"\xff" * 16)


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)
