"""Seeds: every random stream is spawned from ``base.seed`` and a stable name.

``rng_for(seed, "canaries", "lidp", "logreg")`` gives the same numpy Generator for the same
params, independent of which other stages or defenders exist, and never touches global state.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import numpy as np


class SeededBlock(Protocol):
    """What a typed plan reads of ``params.base`` to seed its streams: ``base.seed``."""

    @property
    def seed(self) -> int: ...


def _key(*names: str | int) -> tuple[int, ...]:
    return tuple(n if isinstance(n, int) else zlib.crc32(n.encode()) for n in names)


def seed_sequence(seed: int, *names: str | int) -> np.random.SeedSequence:
    """A SeedSequence for the stream named by ``names`` under root ``seed``."""
    if seed < 0:
        raise ValueError(f"base.seed must be >= 0, got {seed}")
    return np.random.SeedSequence(entropy=seed, spawn_key=_key(*names))


def rng_for(seed: int, *names: str | int) -> np.random.Generator:
    """A numpy Generator for the stream named by ``names`` (e.g. stage, defender, trial)."""
    return np.random.default_rng(seed_sequence(seed, *names))


def int_seed(seed: int, *names: str | int) -> int:
    """A 31-bit integer seed for APIs that take one (sklearn ``random_state``, torch)."""
    return int(seed_sequence(seed, *names).generate_state(1, dtype=np.uint32)[0] >> 1)


#: exclusive upper bound of the integer seeds drawn by :func:`draw_seed` / :func:`draw_seeds`
SEED_BOUND = 2**31 - 1


def draw_seed(rng: np.random.Generator) -> int:
    """One integer seed in ``[0, 2**31 − 1)`` drawn from ``rng`` (for APIs that take an int seed)."""
    return int(rng.integers(0, SEED_BOUND))


def draw_seeds(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` integer seeds in ``[0, 2**31 − 1)`` drawn from ``rng`` in one call."""
    return rng.integers(0, SEED_BOUND, size)
