"""base.device resolution."""

from __future__ import annotations

import pytest
import torch

from privaudit.features import resolve_device


def test_cpu_and_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(ValueError, match=r"base\.device='cuda:1'.*only 1 CUDA device"):
        resolve_device("cuda:1")


def test_cuda_unavailable_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"base\.device='cuda'.*is_available\(\) is False"):
        resolve_device("cuda")


@pytest.mark.parametrize("bad", ["gpu", "", "mps", None, 0])
def test_unknown_setting(bad: object) -> None:
    with pytest.raises(ValueError, match=r"base\.device must be one of"):
        resolve_device(bad)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_real_cuda() -> None:
    assert resolve_device("auto") == "cuda"
