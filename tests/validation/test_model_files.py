"""Models are data: skops/safetensors files are checked without running code; pickles are refused.

Also audits the defenders' own loaders (``Defender.load``) against a malicious pickle.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import skops.io as sio

from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.defenders.info_file import check_defender_files
from privaudit.validation import ModelFileError, check_model_file
from tests.info_files import write_info


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


class Custom:
    """A type no allow-list trusts."""

    def __init__(self) -> None:
        self.value = 3


def _fitted(kind: str, **spec: object):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)).astype(np.float32), np.arange(30) % 3
    model = make_defender(validate_defender_spec({"name": kind, "kind": kind, **spec}), n_classes=3, device="cpu")
    return model.fit(X, y, seed=1) or model


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    out = {}
    for kind, spec in (("logistic_regression", {}), ("torch_mlp", {"hidden": [4], "epochs": 1})):
        model = _fitted(kind, **spec)
        path = root / f"model{model.model_suffix}"
        model.save(path)
        out[kind] = path
    return out


def test_saved_models_pass(saved: dict[str, Path]) -> None:
    assert check_model_file(saved["logistic_regression"]) == "skops"
    assert check_model_file(saved["torch_mlp"]) == "safetensors"


@pytest.mark.parametrize("kind", ["logistic_regression", "torch_mlp"])
def test_pickle_refused_without_running(saved: dict[str, Path], tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / saved[kind].name
    path.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ModelFileError, match=f"{path}.*pickle"):
        check_model_file(path)
    # the defenders' own loaders: must fail and must not run the payload either
    with pytest.raises(Exception):
        make_defender(validate_defender_spec({"name": "x", "kind": kind}), n_classes=3, device="cpu").load(path)
    assert not marker.exists()


def test_untrusted_skops_types_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.skops"
    sio.dump({"payload": Custom()}, path)
    with pytest.raises(ModelFileError, match="untrusted types .*Custom"):
        check_model_file(path)


def test_truncated_wrong_suffix_and_info(saved: dict[str, Path], tmp_path: Path) -> None:
    for name in ("model.skops", "model.safetensors"):
        src = saved["logistic_regression" if name.endswith("skops") else "torch_mlp"].read_bytes()
        (tmp_path / name).write_bytes(src[: len(src) // 3])
        with pytest.raises(ModelFileError, match=str(tmp_path / name)):
            check_model_file(tmp_path / name)
    with pytest.raises(ModelFileError, match="suffix must be one of"):
        check_model_file(tmp_path / "model.pkl")
    write_info(tmp_path / "defs", "a", model_file="../../model.skops")
    with pytest.raises(ModelFileError, match="must be a file name"):
        check_defender_files(tmp_path / "defs", ["a"])


def test_user_defender_bin_files(saved: dict[str, Path], tmp_path: Path) -> None:
    """The ``python`` defender's ``model.bin`` is skops (zip) or safetensors; spec trusted_types extend the list."""
    skops_bin, st_bin = tmp_path / "a.bin", tmp_path / "b.bin"
    skops_bin.write_bytes(saved["logistic_regression"].read_bytes())
    st_bin.write_bytes(saved["torch_mlp"].read_bytes())
    assert check_model_file(skops_bin) == "skops" and check_model_file(st_bin) == "safetensors"
    custom = tmp_path / "c.bin"
    sio.dump({"payload": Custom()}, custom)
    with pytest.raises(ModelFileError, match="untrusted"):
        check_model_file(custom)
    trusted = sio.get_untrusted_types(file=custom)
    assert check_model_file(custom, trusted) == "skops"


@pytest.mark.parametrize("suffix", [".safetensors", ".bin"])
def test_a_safetensors_file_whose_header_length_starts_with_the_pickle_opcode_loads(tmp_path: Path, suffix: str) -> None:
    """A safetensors file starts with its header's length (u64 LE): a length of 0x80 + 256 k has the pickle
    opcode as its first byte. Such a user state_dict ({"means": (10, 64)}) was refused as a pickle."""
    from safetensors.numpy import save

    for pad in range(0, 200):  # a state whose header length's low byte is 0x80
        data = save({"means" + "x" * pad: np.zeros((10, 64))})
        if data[:1] == b"\x80":
            break
    else:  # pragma: no cover - the loop always finds one
        pytest.fail("no header of length 0x80 mod 256 found")
    path = tmp_path / f"model{suffix}"
    path.write_bytes(data)
    assert check_model_file(path) == "safetensors"
    path.write_bytes(pickle.dumps({"means": np.zeros(3)}))  # a real pickle is still refused
    with pytest.raises(ModelFileError, match="is a Python pickle"):
        check_model_file(path)
