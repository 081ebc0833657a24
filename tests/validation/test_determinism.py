"""Deterministic-kernel settings per device (docs/determinism.md); no GPU needed to test the logic."""

from __future__ import annotations

import pytest
import torch

from privaudit.repro.determinism import CUBLAS_ENV, configure_determinism, determinism_settings


def test_cpu_changes_nothing() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    s = configure_determinism("cpu")
    assert s == {"deterministic_algorithms": False, "cudnn_deterministic": False, "cudnn_benchmark": False, "env": {}}
    assert torch.are_deterministic_algorithms_enabled() is before


@pytest.fixture
def restore_torch(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    state = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
             torch.backends.cudnn.benchmark)
    monkeypatch.delenv(CUBLAS_ENV, raising=False)
    yield
    torch.use_deterministic_algorithms(state[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = state[1], state[2]


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_turns_on_deterministic_kernels(restore_torch: None, device: str) -> None:
    import os

    s = configure_determinism(device)
    assert s["deterministic_algorithms"] and os.environ[CUBLAS_ENV] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark


def test_user_cublas_setting(restore_torch: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CUBLAS_ENV, ":16:8")
    assert configure_determinism("cuda")["env"] == {CUBLAS_ENV: ":16:8"}
    monkeypatch.setenv(CUBLAS_ENV, ":0:0")
    with pytest.raises(ValueError, match=CUBLAS_ENV):
        configure_determinism("cuda")


def test_unknown_device() -> None:
    with pytest.raises(ValueError, match="base.device"):
        determinism_settings("tpu")
