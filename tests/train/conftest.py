"""One torch thread for the batched-trainer tests (as the canaries stage runs them)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
