"""Digits as the one-run audit sees them (:mod:`privaudit.testing.planted.digits`, shared with the benchmarks)."""

from __future__ import annotations

import pytest

from privaudit.testing.planted.digits import Digits, digits_train
from tests.torch_threads import _one_torch_thread  # noqa: F401 - autouse fixture


@pytest.fixture(scope="session")
def digits() -> Digits:
    return digits_train()
