"""The defender protocol: a training recipe privaudit audits.

A *defender* (Pedersen et al. 2022, "Problem statement and methodology") is a trainer
T_D plus its settings; ``fit`` produces the released model M_D. Every defender declares
whether it is deterministic given its seed and whether it is invariant to the order of
the training samples, so the LTU trainer attack knows what Theorem 3 predicts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.defenders.specs import DefenderSpecBase

#: the spec model a trainer takes (:mod:`privaudit.defenders.specs`)
SpecT = TypeVar("SpecT", bound=DefenderSpecBase)


class Defender(ABC, Generic[SpecT]):
    """A training recipe: ``fit(X, y, seed)`` then ``predict_proba(X)``.

    ``Defender[S]`` trains the validated spec ``S`` (``self.spec``, typed).
    Subclasses set the class attributes and implement the four abstract methods.
    Models are persisted with skops (sklearn) or safetensors (torch), never raw pickle.
    """

    kind: ClassVar[str]
    #: file suffix of the saved model
    model_suffix: ClassVar[str] = ".bin"

    spec: SpecT

    def __init__(self, spec: SpecT, n_classes: int, device: str = "cpu") -> None:
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        self.spec = spec
        self.n_classes = n_classes
        self.device = device

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def deterministic(self) -> bool:
        """Whether ``fit`` gives the same model for every ``seed`` on the same data in the same
        order, i.e. the trainer has no randomness an LTU attacker does not know (Theorem 3)."""
        return True

    @property
    def order_invariant(self) -> bool:
        """Whether permuting the training samples leaves the model unchanged."""
        return True

    @abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "Defender[SpecT]":
        """Train on ``X`` (n, d) float32 and labels ``y`` (n,) int64 in [0, n_classes)."""

    @abstractmethod
    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), rows summing to 1."""

    @abstractmethod
    def save(self, path: Path) -> None:
        """Persist the fitted model (skops or safetensors)."""

    @abstractmethod
    def load(self, path: Path) -> "Defender[SpecT]":
        """Load a model written by :meth:`save` without executing code."""

    def claimed_epsilon(self) -> float | None:
        """The ε the recipe claims (DP defenders), or ``None`` when it claims none."""
        return None

    def claimed_delta(self) -> float | None:
        return None

    def claimed_neighbourhood(self) -> str:
        """What the claim protects (:mod:`privaudit.claims.claim`): ``add_remove`` unless overridden."""
        return Neighbourhood.ADD_REMOVE

    def claimed_mechanism(self) -> Any:
        """The mechanism the recipe runs (:mod:`privaudit.claims.mechanisms`), whose trade-off curve the
        black-box bounds test the claim against; ``None``: only the (ε, δ) point is claimed."""
        return None

    def claim_correction(self) -> str | None:
        """One line when the recipe's claim had to be corrected to hold (the defenders stage prints it); None."""
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description written next to the model."""
        return {
            "name": self.name,
            "kind": self.kind,
            "deterministic": self.deterministic,
            "order_invariant": self.order_invariant,
            "claimed_epsilon": self.claimed_epsilon(),
            "claimed_delta": self.claimed_delta(),
            "claimed_neighbourhood": self.claimed_neighbourhood(),
            "claimed_mechanism": None if (m := self.claimed_mechanism()) is None else m.model_dump(mode="json"),
            "spec": self.spec.model_dump(mode="json"),
        }


class WrappingDefender(Defender[SpecT]):
    """A randomized recipe whose released model is another defender's model.

    MIP (Izzo et al. 2023, Algorithm 1) releases its base model with noise added to the
    parameters; PATE (Papernot et al.) releases its student. Predictions and the model file are
    those of :meth:`released` (same format and suffix); the recipe itself is randomized, so it is
    neither deterministic nor order invariant (Pedersen et al. 2022, Theorem 3 does not apply).
    """

    @property
    def deterministic(self) -> bool:
        return False

    @property
    def order_invariant(self) -> bool:
        return False

    @abstractmethod
    def released(self) -> Defender[Any]:
        """The defender whose fitted model is released."""

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.released().predict_proba(X)

    def save(self, path: Path) -> None:
        self.released().save(path)

    def load(self, path: Path) -> "WrappingDefender[SpecT]":
        self.released().load(path)
        return self


