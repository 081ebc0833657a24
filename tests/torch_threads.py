"""One torch intra-op thread for a test module: tiny models train much faster (as the stages run them).

Imported by the conftest of each test package that trains torch models (an imported autouse fixture
is registered like one defined there).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
