"""``data/defenders/<name>/info.json`` has one reader, which validates on read (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privaudit.defenders.info_file import check_defender_files, read_defender_info
from privaudit.validation import ModelFileError
from tests.info_files import write_info


def test_a_complete_record_is_read_typed_with_its_claim(tmp_path: Path) -> None:
    write_info(tmp_path, "d", claimed_epsilon=2.0, claimed_delta=1e-5, claimed_neighbourhood="add_remove",
               mip_eta=0.3, spec={"trusted_types": ["mymod.Model"]})
    info = read_defender_info(tmp_path, "d")
    assert (info.name, info.model_file, info.n_defender, info.n_classes) == ("d", "model.skops", 100, 10)
    assert info.claim is not None and (info.claim.epsilon, info.claim.delta) == (2.0, 1e-5)
    assert info.mip_eta == 0.3 and info.trusted_types == ("mymod.Model",)
    assert info.raw["claimed_epsilon"] == 2.0
    with pytest.raises(TypeError):
        info.raw["claimed_epsilon"] = 0.1  # type: ignore[index]  # read-only: the record is what was written


@pytest.mark.parametrize("keys, match", [
    ({"name": "other"}, "name is 'other', expected 'd'"),
    ({"n_defender": 0}, "n_defender must be an integer >= 1, got 0"),
    ({"n_defender": "900"}, "n_defender must be an integer"),
    ({"n_classes": True}, "n_classes must be an integer >= 2"),
    ({"spec": {"trusted_types": "mymod.Model"}}, "spec.trusted_types must be a list"),
    ({"claimed_epsilon": "two"}, "claimed_epsilon"),
])
def test_a_bad_record_is_refused_naming_the_file_and_key(tmp_path: Path, keys: dict, match: str) -> None:
    path = write_info(tmp_path, "d", **keys)
    with pytest.raises(ValueError, match=match) as err:
        read_defender_info(tmp_path, "d")
    assert str(path) in str(err.value)


def test_a_missing_or_corrupt_file_says_which_and_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"d/info.json not found; run the defenders stage"):
        read_defender_info(tmp_path, "d")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "info.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_defender_info(tmp_path, "d")


@pytest.mark.parametrize("model_file", ["../../model.skops", "sub/model.skops", "", 3])
def test_a_model_file_outside_the_folder_is_refused(tmp_path: Path, model_file: object) -> None:
    write_info(tmp_path, "d", model_file=model_file)
    with pytest.raises(ModelFileError, match="must be a file name inside"):
        read_defender_info(tmp_path, "d")
    with pytest.raises(ModelFileError):
        check_defender_files(tmp_path, ["d"])


def test_the_model_file_contract_runs_on_the_file_the_record_names(tmp_path: Path) -> None:
    write_info(tmp_path, "d", model_file="model.pkl")
    (tmp_path / "d" / "model.pkl").write_bytes(b"\x80\x04K\x01.")  # a pickle
    with pytest.raises(ModelFileError, match="model.pkl"):
        check_defender_files(tmp_path, ["d"])
