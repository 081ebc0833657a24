"""Composition of privacy claims: what a person in the data has lost after several releases.

:func:`compose` turns claims made for the same neighbourhood into one :class:`ComposedClaim`, the
privacy profile δ(ε) of running all of them on the same data (adaptively: each release may depend on
the earlier ones), with :meth:`ComposedClaim.epsilon_at` and :meth:`ComposedClaim.delta_at`.

**Privacy-loss distributions.** Every (ε, δ) profile is the hockey-stick divergence of a dominating
pair (P, Q), δ(ε') = E_{L∼PLD}[(1 − e^{ε' − L})₊] with L = log(P/Q) the privacy loss (an atom at +∞
contributes 1); composing mechanisms adds independent losses, i.e. convolves their PLDs (Koskela,
Jälkö & Honkela 2020; Doroshenko et al. 2022, "Connect the dots", pessimistic estimate).

* **A claim with a declared mechanism** composes through its mechanism's own PLD
  (``mechanism.pld(discretization)``, dp_accounting's ``privacy_loss_distribution``): the result
  equals dp_accounting's ``PLDAccountant`` composition of the same ``DpEvent``s
  (``mechanism.dp_event()``) up to the discretization (tests/claims/test_composition.py: ≤ 1 %
  relative ε).
* **A bare (ε, δ) claim** composes through its worst-case pair, the "generalized randomized response"
  of Kairouz, Oh & Viswanath 2015 (ICML, "The composition theorem for differential privacy", §3):
  loss +∞ with probability δ, +ε with probability (1 − δ) e^ε/(1 + e^ε), −ε with probability
  (1 − δ)/(1 + e^ε) — every (ε, δ)-DP mechanism is a post-processing of it (their Thm. 3.3 proof,
  Lemma on dominance), so its composition is the *optimal* composition of the class. For k equal
  claims this is KOV Thm. 3.3: the composition is ((k − 2i)ε, 1 − (1 − δ)^k (1 − δ_i))-DP for
  i = 0 … ⌊k/2⌋ with

      δ_i = Σ_{l=0}^{i−1} C(k, l) (e^{(k−l)ε} − e^{(k−2i+l)ε}) / (1 + e^ε)^k,                      (KOV 3.3)

  and nothing better holds. Heterogeneous (ε_j, δ_j) claims compose exactly by the same convolution
  (Murtagh & Vadhan 2016, TCC, "The complexity of computing the optimal composition of differential
  privacy", Thm. 1.5):

      δ(ε') = 1 − Π_j(1 − δ_j) + Π_j(1 − δ_j) Σ_{S ⊆ [k]} max(0, e^{Σ_{j∈S} ε_j} − e^{ε'} e^{Σ_{j∉S} ε_j})
              / Π_j(1 + e^{ε_j}).                                                                   (MV 1.5)

  It is computed here in closed form over the distinct ε values (claims with equal ε merge into a
  binomial, so a ledger of repeated releases costs Π(m_v + 1) atoms, not 2^k); beyond
  :data:`MAX_EXACT_ATOMS` atoms (the problem is #P-complete in general, MV Thm. 1.2) the bare claims
  go through dp_accounting's pessimistic PLD of the same pair (``from_privacy_parameters``, losses
  rounded up: an upper bound on δ, so a sound ε).
* **A mixture** (some claims with a mechanism, some bare) convolves each bare claim's dominating PLD
  with the mechanisms' PLDs (dp_accounting).
* **A claim without DP** (ε = ∞) composes to ε = ∞ at every δ < 1.

Only claims of the same neighbourhood compose: a mix is refused, naming both (convert one first with
:meth:`privaudit.claims.claim.PrivacyClaim.implied_for` if that is what is meant).

Pure: numpy only, dp_accounting imported lazily where a PLD is needed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privaudit.claims.claim import PrivacyClaim

__all__ = ["ComposedClaim", "MAX_EXACT_ATOMS", "compose"]

#: bare claims compose exactly up to this many privacy-loss atoms, through dp_accounting's PLD beyond
MAX_EXACT_ATOMS = 1 << 18
#: the privacy-loss grid of the PLD path (dp_accounting's ``PLDAccountant`` default)
DEFAULT_DISCRETIZATION = 1e-4


@dataclass(frozen=True)
class _DiscreteLoss:
    """The composed privacy loss of bare claims: finite atoms ``loss`` with P-probabilities ``weight`` (given
    no +∞), and the mass ``p_inf`` at +∞."""

    loss: NDArray[np.float64]   # descending
    weight: NDArray[np.float64]
    p_inf: float

    @classmethod
    def of(cls, claims: Iterable[tuple[float, float]]) -> "_DiscreteLoss":
        from scipy import special  # here, not at import: the gate and the report stage start without scipy

        pairs = list(claims)
        log_keep = sum(math.log1p(-d) for _, d in pairs)
        p_inf = -math.expm1(log_keep)
        loss = np.zeros(1)
        logw = np.zeros(1)
        for eps, m in sorted(Counter(e for e, _ in pairs).items()):
            j = np.arange(m + 1, dtype=np.float64)  # j of the m claims at eps take loss +eps
            lw = (special.gammaln(m + 1) - special.gammaln(j + 1) - special.gammaln(m - j + 1)
                  + j * (eps - np.logaddexp(0.0, eps)) + (m - j) * (-np.logaddexp(0.0, eps)))
            loss = (loss[:, None] + (2.0 * j - m)[None, :] * eps).ravel()
            logw = (logw[:, None] + lw[None, :]).ravel()
        order = np.argsort(-loss, kind="stable")
        return cls(loss=loss[order], weight=np.exp(logw[order]), p_inf=p_inf)

    def delta_at(self, epsilon: float) -> float:
        """(MV 1.5) at ε' = ``epsilon``."""
        above = self.loss > epsilon
        tail = float(np.sum(self.weight[above] * -np.expm1(epsilon - self.loss[above])))
        return min(1.0, self.p_inf + (1.0 - self.p_inf) * tail)

    def epsilon_at(self, delta: float) -> float:
        """The smallest ε' ≥ 0 with δ(ε') ≤ ``delta``: on each segment between atoms δ(ε') = p∞ + (1 − p∞)(A − e^{ε'} B)
        with A, B the sums of w and w e^{−L} over the atoms above, solved in closed form."""
        if delta >= 1.0:
            return 0.0
        if delta < self.p_inf * (1.0 - 1e-9):  # float rounding of 1 − Π(1 − δ_j) is no reason for ε = ∞
            return math.inf
        target = max(0.0, delta - self.p_inf) / (1.0 - self.p_inf)
        if self.delta_at(0.0) <= delta:
            return 0.0
        # δ at each atom, descending losses: the atoms above loss[i] are 0..i-1
        a = np.concatenate([[0.0], np.cumsum(self.weight)])
        b = np.concatenate([[0.0], np.cumsum(self.weight * np.exp(-self.loss))])
        # the segment (loss[i], loss[i-1]] has the atoms 0..i-1 above it; find the first i where δ(loss[i]) > target
        at_atoms = a[:-1] - np.exp(self.loss) * b[:-1]  # δ-tail at ε' = loss[i] (atoms 0..i-1 above)
        i = int(np.argmax(at_atoms > target))
        # ε' lies in (loss[i], loss[i-1]]: solve A - e^{ε'} B = target with the atoms 0..i-1
        eps = math.log((a[i] - target) / b[i])
        return max(0.0, min(eps, float(self.loss[i - 1])))


def _pld_of_bare(epsilon: float, delta: float, discretization: float) -> Any:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(epsilon, delta),
                                       value_discretization_interval=discretization)


@dataclass(frozen=True)
class ComposedClaim:
    """The composition of ``claims`` (all for ``neighbourhood``): its privacy profile. Built by :func:`compose`."""

    claims: tuple[PrivacyClaim, ...]
    neighbourhood: Any
    discretization: float = DEFAULT_DISCRETIZATION

    @property
    def private(self) -> bool:
        """False when a claim has no DP (ε = ∞): the composition then has none either."""
        return all(c.mechanism is not None or math.isfinite(c.epsilon) for c in self.claims)

    @property
    def method(self) -> str:
        """How it is composed: ``"kov"`` (bare claims, exact), ``"pld"`` (dp_accounting), or ``"none"`` (no DP)."""
        if not self.private:
            return "none"
        if all(c.mechanism is None for c in self.claims) and self._atoms() <= MAX_EXACT_ATOMS:
            return "kov"
        return "pld"

    def _atoms(self) -> int:
        counts = Counter(float(c.epsilon) for c in self.claims)
        n = 1
        for m in counts.values():
            n *= m + 1
            if n > MAX_EXACT_ATOMS:
                break
        return n

    @cached_property
    def _exact(self) -> _DiscreteLoss:
        return _DiscreteLoss.of((float(c.epsilon), float(c.delta)) for c in self.claims)

    @cached_property
    def _pld(self) -> Any:
        d = self.discretization
        plds = [c.mechanism.pld(d) if c.mechanism is not None else _pld_of_bare(float(c.epsilon), float(c.delta), d)
                for c in self.claims]
        out = plds[0]
        for p in plds[1:]:
            out = out.compose(p)
        return out

    def epsilon_at(self, delta: float) -> float:
        """The composed ε at ``delta`` (``inf`` without DP, or below the δ no ε reaches)."""
        if not 0.0 <= delta <= 1.0:
            raise ValueError(f"delta must be in [0, 1], got {delta!r}")
        method = self.method
        if method == "none":
            return 0.0 if delta >= 1.0 else math.inf
        if method == "kov":
            return self._exact.epsilon_at(delta)
        return max(0.0, float(self._pld.get_epsilon_for_delta(delta)))

    def delta_at(self, epsilon: float) -> float:
        """The composed δ at ``epsilon`` (1 without DP)."""
        if not epsilon >= 0.0:
            raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
        method = self.method
        if method == "none":
            return 1.0
        if method == "kov":
            return self._exact.delta_at(float(epsilon))
        return min(1.0, float(self._pld.get_delta_for_epsilon(float(epsilon))))

    def basic(self) -> tuple[float, float]:
        """Basic composition (Σ ε_j, Σ δ_j) of the claims' points (Dwork & Roth 2014, Thm. 3.16): the bound
        the optimal composition never exceeds."""
        return (float(sum(c.epsilon for c in self.claims)), float(min(1.0, sum(c.delta for c in self.claims))))


def compose(claims: Iterable[PrivacyClaim], *, discretization: float = DEFAULT_DISCRETIZATION) -> ComposedClaim:
    """The composition of ``claims`` (see the module docstring), all for the same neighbourhood.

    >>> c = compose([PrivacyClaim(1.0, 0.0, "add_remove")] * 2)
    >>> round(c.epsilon_at(0.0), 9), c.method
    (2.0, 'kov')

    Raises:
        ValueError: no claim, or claims for different neighbourhoods (naming both), or a non-positive
            ``discretization``.
    """
    claims = tuple(claims)
    if not claims:
        raise ValueError("compose needs at least one claim, got none")
    if not (discretization > 0 and math.isfinite(discretization)):
        raise ValueError(f"discretization must be a number > 0, got {discretization!r}")
    for c in claims:
        if not isinstance(c, PrivacyClaim):
            raise TypeError(f"compose takes PrivacyClaim objects, got {type(c).__name__}: {c!r}")
    first = claims[0].neighbourhood
    for i, c in enumerate(claims[1:], start=1):
        if c.neighbourhood != first:
            raise ValueError(f"claims of different neighbourhoods do not compose: claim 0 is for {first.value!r}, "
                             f"claim {i} for {c.neighbourhood.value!r}; convert one first "
                             f"(PrivacyClaim.implied_for) or compose each neighbourhood's releases separately")
    return ComposedClaim(claims=claims, neighbourhood=first, discretization=float(discretization))
