"""Composition of (ε, δ) claims made on the same people's data.

STAND-IN (branch ``ledger``): the minimal exact composition of bare (ε, δ) claims, written so that the
release ledger can run before the ``claims-core`` branch lands; that branch's module of the same name
(PLD composition of declared mechanisms with dp_accounting, the same API) replaces this one. Here a claim
that declares a mechanism composes through its (ε, δ) point, which is valid (the mechanism satisfies its
claimed point) but looser than composing the mechanism's own privacy loss distribution.

Each (ε, δ) claim is dominated by the "generalized randomized response" pair (Kairouz, Oh & Viswanath 2015,
ICML, Lemma 3.2 / Theorem 2.1): its privacy loss distribution has three atoms, +∞ with mass δ, +ε with mass
(1 − δ)e^ε/(1 + e^ε) and −ε with mass (1 − δ)/(1 + e^ε). Composition adds independent losses, so the composed
loss distribution is the convolution of the claims' distributions (exact for heterogeneous claims: Murtagh &
Vadhan 2016, the optimal composition is the composition of the dominating pairs), and the composed
privacy profile is the hockey-stick divergence δ(ε) = P[L = ∞] + E[(1 − e^{ε − L})₊ ; L < ∞]
(KOV 2015 Theorem 3.3 for k equal claims). Atoms are merged on a grid of 1e-9 in the loss, rounding the
loss up (pessimistic: δ(ε) only grows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ComposedClaim", "compose"]

#: the loss grid atoms are merged on (rounded up), and the coarser grids used past MAX_ATOMS atoms
_GRIDS = (1e-9, 1e-6, 1e-4, 1e-3, 1e-2)
_MAX_ATOMS = 1 << 15


class _Claim(Protocol):
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def neighbourhood(self) -> Any: ...


def _atoms(epsilon: float, delta: float) -> dict[float, float]:
    """The finite atoms of the dominating pair's privacy loss distribution of an (ε, δ) claim."""
    if epsilon == 0.0:
        return {0.0: 1.0 - delta}
    tail = math.exp(-epsilon)  # written with e^-ε so that a large ε does not overflow
    return {epsilon: (1.0 - delta) / (1.0 + tail), -epsilon: (1.0 - delta) * tail / (1.0 + tail)}


def _merge(atoms: dict[float, float], grid: float) -> dict[float, float]:
    out: dict[float, float] = {}
    for loss, mass in atoms.items():
        key = math.ceil(loss / grid - 1e-6) * grid
        out[key] = out.get(key, 0.0) + mass
    return out


@dataclass(frozen=True)
class ComposedClaim:
    """The composition of claims: its privacy profile through :meth:`delta_at` and :meth:`epsilon_at`.

    Attributes:
        claims: the claims composed, in order.
        losses, masses: the finite atoms of the composed privacy loss distribution.
        infinite_mass: P[L = ∞] = 1 − Π(1 − δ_i).
    """

    claims: tuple[Any, ...]
    losses: tuple[float, ...]
    masses: tuple[float, ...]
    infinite_mass: float

    def delta_at(self, epsilon: float) -> float:
        """δ(ε) of the composition (the hockey-stick divergence of the composed dominating pair)."""
        if math.isinf(epsilon):
            return self.infinite_mass
        total = self.infinite_mass
        for loss, mass in zip(self.losses, self.masses):
            if loss > epsilon:
                total += mass * -math.expm1(epsilon - loss)
        return min(1.0, total)

    def epsilon_at(self, delta: float) -> float:
        """The smallest ε with δ(ε) ≤ ``delta`` (``inf`` when no finite ε has it), to 1e-9 rounded up."""
        if not 0.0 <= delta <= 1.0:
            raise ValueError(f"delta must be in [0, 1], got {delta!r}")
        if any(math.isinf(c.epsilon) for c in self.claims) or self.infinite_mass > delta:
            return math.inf
        if not self.losses or self.delta_at(0.0) <= delta:
            return 0.0
        lo, hi = 0.0, max(self.losses)
        while hi - lo > 1e-10 * max(1.0, hi):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if self.delta_at(mid) <= delta else (mid, hi)
        return hi


def compose(claims: Sequence[_Claim]) -> ComposedClaim:
    """Compose ``claims`` (all of one neighbourhood; ``ValueError`` naming both on a mix).

    A claim with ε = ∞ (no DP) composes to ε = ∞ at every δ < 1.
    """
    claims = tuple(claims)
    if not claims:
        raise ValueError("compose needs at least one claim")
    first = claims[0].neighbourhood
    for c in claims[1:]:
        if c.neighbourhood != first:
            raise ValueError(f"claims of different neighbourhoods do not compose: {str(first)!r} and "
                             f"{str(c.neighbourhood)!r}; convert them to one neighbourhood first")
    if any(math.isinf(c.epsilon) for c in claims):
        return ComposedClaim(claims, (), (), 1.0)
    atoms: dict[float, float] = {0.0: 1.0}
    keep = 1.0
    grid = 0
    for c in claims:
        step = _atoms(float(c.epsilon), float(c.delta))
        keep *= 1.0 - float(c.delta)
        atoms = _convolve(atoms, step, _GRIDS[grid])
        while len(atoms) > _MAX_ATOMS and grid + 1 < len(_GRIDS):
            grid += 1
            atoms = _merge(atoms, _GRIDS[grid])
    losses = tuple(sorted(atoms))
    return ComposedClaim(claims, losses, tuple(atoms[x] for x in losses), max(0.0, 1.0 - keep))


def _convolve(atoms: dict[float, float], step: dict[float, float], grid: float) -> dict[float, float]:
    """The finite atoms of the sum of two independent losses (finite parts only), merged on ``grid``."""
    out: dict[float, float] = {}
    for a, pa in atoms.items():
        for b, pb in step.items():
            key = math.ceil((a + b) / grid - 1e-6) * grid
            out[key] = out.get(key, 0.0) + pa * pb
    return out
