"""One torch thread for the batched-trainer tests (as the canaries stage runs them); the native library."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def kernel():  # type: ignore[no-untyped-def]
    """privaudit's native library (``privaudit.train.native``); the test skips, saying why, where it cannot be built."""
    from privaudit.train import native

    k = native.linear_dp_kernel()
    if k is None:
        pytest.skip(f"the native library is unavailable here: {native.unavailable_reason()}")
    return k
