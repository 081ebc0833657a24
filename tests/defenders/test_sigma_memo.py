"""The memo on disk of opacus's σ calibration (:mod:`privaudit.defenders.sigma_memo`): the same bits as computing,
never served for another key or from a broken file, and off when ``PRIVAUDIT_SIGMA_CACHE`` is empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privaudit.defenders import dp_sgd, sigma_memo

ARGS = (1.0, 1e-5, 64 / 898, 281, "prv")


def _fresh(monkeypatch: pytest.MonkeyPatch, memo: Path | str) -> None:
    monkeypatch.setenv(sigma_memo.ENV, str(memo))
    dp_sgd._sigma.cache_clear()  # the in-process memo


def _no_opacus(monkeypatch: pytest.MonkeyPatch) -> None:
    import opacus.accountants.utils as utils

    def refuse(**_: object) -> float:
        raise AssertionError("σ was computed, not read from the memo")

    monkeypatch.setattr(utils, "get_noise_multiplier", refuse)


def test_a_remembered_sigma_is_the_computed_one_and_is_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = tmp_path / "sigma.json"
    _fresh(monkeypatch, memo)
    computed = dp_sgd._sigma(*ARGS)
    assert list(json.loads(memo.read_text()).values()) == [computed]
    _fresh(monkeypatch, memo)
    _no_opacus(monkeypatch)
    assert dp_sgd._sigma(*ARGS) == computed  # bit for bit: JSON floats round-trip


def test_another_key_or_another_opacus_is_computed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = tmp_path / "sigma.json"
    _fresh(monkeypatch, memo)
    dp_sgd._sigma(*ARGS)
    key = sigma_memo.memo_key(*ARGS)
    assert sigma_memo.lookup(key) is not None
    assert sigma_memo.lookup(sigma_memo.memo_key(1.0, 1e-5, 64 / 899, 281, "prv")) is None  # another q
    assert sigma_memo.lookup(sigma_memo.memo_key(1.0, 1e-5, 64 / 898, 281, "rdp")) is None  # another accountant
    monkeypatch.setattr(sigma_memo, "_version", lambda dist: "99.0" if dist == "opacus" else "1")
    assert sigma_memo.lookup(sigma_memo.memo_key(*ARGS)) is None  # another opacus: its own σ


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"k": "text"}'])
def test_a_broken_memo_is_ignored_and_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    memo = tmp_path / "sigma.json"
    memo.write_text(content)
    _fresh(monkeypatch, memo)
    sigma = dp_sgd._sigma(*ARGS)
    assert json.loads(memo.read_text()) == {sigma_memo.memo_key(*ARGS): sigma}


def test_an_empty_setting_turns_the_memo_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(monkeypatch, "")
    monkeypatch.chdir(tmp_path)
    assert sigma_memo.memo_path() is None
    dp_sgd._sigma(*ARGS)
    assert list(tmp_path.iterdir()) == []
    unwritable = tmp_path / "file"
    unwritable.write_text("")
    _fresh(monkeypatch, unwritable / "sigma.json")  # its folder cannot be made: computed, nothing raised
    assert dp_sgd._sigma(*ARGS) > 0
