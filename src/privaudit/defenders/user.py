"""A user's own training recipe by import path (``kind: python``).

Protocol (``target: package.module:function``, or ``path/to/file.py:function`` relative to the
working directory, which for the stages is the repository root)::

    def train(X, y, n_classes, seed, **options) -> model

* ``X`` (n, d) float32 features, ``y`` (n,) int64 labels in ``[0, n_classes)``, ``seed`` an int
  derived from ``base.seed`` (use it for *all* randomness), ``options`` the spec's ``options``.
* ``model`` has ``predict_proba(X) -> (m, n_classes)`` (rows sum to 1; an sklearn estimator
  trained on a subset of the classes is widened by its ``classes_``).
* A ``train`` that declares a ``device`` parameter (``def train(X, y, n_classes, seed, device="cpu")``)
  gets ``base.device`` resolved (``cpu`` or ``cuda``), unless ``options`` sets it: a torch trainer then
  runs on the GPU wherever privaudit fits it (release fit, canary shards, one-run and white-box runs).

Persistence (never pickle):

* a scikit-learn estimator is saved with skops; loading trusts only the sklearn types of
  :data:`privaudit.validation.model_files.TRUSTED_TYPES` plus the spec's ``trusted_types`` and
  refuses anything else;
* any other model must provide ``state_dict() -> Mapping[str, ndarray | Tensor]``, saved with
  safetensors, and the spec names a ``loader: package.module:function`` with
  ``load(state: dict[str, numpy.ndarray], n_classes, **options) -> model``.

The spec also declares what the recipe guarantees, since privaudit cannot know:
``deterministic``, ``order_invariant`` (for LTU Theorem 3) and an optional ``claimed_epsilon``/
``claimed_delta``. The target module is imported when the spec is validated
(:class:`privaudit.defenders.specs.PythonSpec`, :mod:`privaudit.defenders.user_target`), so a typo fails
before any work (``defenders[i].target``). The ``user_code`` stage hashes the target, the loader and
the local modules they import (:mod:`privaudit.repro.user_code`), so DVC retrains when one of them
changes; nothing goes into ``dvc.yaml``. Stages run from the repository root
(``python -m stages.defenders``), so repository modules are importable; prefer the file form
(``examples/user_trainer.py:train``) for files outside a package (opacus installs a top-level
``examples`` package that shadows ``examples.user_trainer``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import skops.io as sio
from safetensors.numpy import load_file, save
from sklearn.base import BaseEstimator

from privaudit.artifacts import write_safetensors
from privaudit.defenders.base import Defender
from privaudit.defenders.registry import register
from privaudit.defenders.skops_files import dump_skops
from privaudit.defenders.specs import PythonSpec
from privaudit.defenders.user_errors import user_code
from privaudit.defenders.user_target import resolve_target
from privaudit.validation.model_files import TRUSTED_TYPES

_SKOPS, _STATE = "skops", "safetensors"


@register("python")
class PythonDefender(Defender[PythonSpec]):
    """Runs the user's ``target``; persistence by skops (sklearn) or safetensors + ``loader``."""

    model_suffix = ".bin"

    def __init__(self, spec: PythonSpec, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self.model: Any = None

    @property
    def deterministic(self) -> bool:
        return self.spec.deterministic

    @property
    def order_invariant(self) -> bool:
        return self.spec.order_invariant

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "PythonDefender":
        train = resolve_target(self.spec.target)
        options = dict(self.spec.options)
        if "device" not in options and _takes_device(train):  # base.device, resolved (cpu | cuda)
            options["device"] = self.device
        with user_code(self.name, self.spec.target):
            model = train(X, y, self.n_classes, seed, **options)
        if not callable(getattr(model, "predict_proba", None)):
            raise ValueError(f"defender {self.name!r}: {self.spec.target} returned {type(model).__name__}, "
                             f"which has no predict_proba")
        if not isinstance(model, BaseEstimator) and not callable(getattr(model, "state_dict", None)):
            raise ValueError(f"defender {self.name!r}: {self.spec.target} returned {type(model).__name__}: "
                             f"not an sklearn estimator and no state_dict(), so it cannot be saved safely")
        self.model = model
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise RuntimeError(f"defender {self.name!r} is not fitted")
        with user_code(self.name, f"{type(self.model).__name__}.predict_proba"):
            p = np.asarray(self.model.predict_proba(X), dtype=np.float64)
        classes = getattr(self.model, "classes_", None)
        if classes is not None and p.shape[1] != self.n_classes:
            full = np.zeros((len(X), self.n_classes))
            full[:, np.asarray(classes, dtype=int)] = p
            p = full
        if p.shape != (len(X), self.n_classes):
            raise ValueError(f"defender {self.name!r}: predict_proba returned shape {p.shape}, "
                             f"expected {(len(X), self.n_classes)}")
        return p / p.sum(axis=1, keepdims=True)  # float64 rows summing to 1 (float32 models drift)

    def save(self, path: Path) -> None:
        if self.model is None:
            raise RuntimeError(f"defender {self.name!r} is not fitted")
        if isinstance(self.model, BaseEstimator):
            dump_skops(self.model, path)
            return
        if self.spec.loader is None:
            raise ValueError(f"defender {self.name!r}: its trainer returned a {type(self.model).__name__}, not a "
                             f"scikit-learn estimator, so it is saved as its state_dict and needs a loader to be "
                             f"reloaded: add `loader: path/file.py:load` (called as load(state, n_classes, "
                             f"**options)) to the defenders entry named {self.name!r}")
        state = {k: np.ascontiguousarray(v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v))
                 for k, v in self.model.state_dict().items()}
        write_safetensors(path, save(state, metadata={"format": _STATE, "n_classes": str(self.n_classes)}))

    def load(self, path: Path) -> "PythonDefender":
        if not zipfile.is_zipfile(path):  # a safetensors state, rebuilt by the user's loader
            if self.spec.loader is None:
                raise ValueError(f"{path} holds a state_dict but defender {self.name!r} has no 'loader'")
            loader = resolve_target(self.spec.loader, "loader")
            with user_code(self.name, self.spec.loader):
                self.model = loader(load_file(str(path)), self.n_classes, **self.spec.options)
            return self
        untrusted = sio.get_untrusted_types(file=path)
        unknown = sorted(set(untrusted) - set(TRUSTED_TYPES) - set(self.spec.trusted_types))
        if unknown:
            raise ValueError(f"refusing to load {path}: it contains untrusted types {unknown} "
                             f"(list them in trusted_types only if you trust this file)")
        self.model = sio.load(path, trusted=untrusted)
        return self

    def claimed_epsilon(self) -> float | None:
        return self.spec.claimed_epsilon

    def claimed_delta(self) -> float | None:
        return self.spec.claimed_delta

    def claimed_neighbourhood(self) -> str:
        return self.spec.claimed_neighbourhood

    def claimed_mechanism(self) -> Any:
        return self.spec.mechanism

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "note": "user trainer: deterministic/order_invariant/claims are declared "
                                              "by the user, not verified"}


def _takes_device(train: Any) -> bool:
    """Whether the user's ``train`` declares a ``device`` parameter (then it gets ``base.device`` resolved)."""
    import inspect

    try:
        params = inspect.signature(train).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("device")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
