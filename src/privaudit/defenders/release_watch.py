"""The release run, watched: what :mod:`privaudit.hooks` saw while the ``defenders`` stage trained the released model.

Issue 27. The white-box audit (:mod:`privaudit.audits.whitebox`) used to watch only its own audit
runs, so a loop that behaves differently when it is not audited (one that branches on
``privaudit.hooks.is_recording()``, or on being called for the first time) released a model
nothing had seen. The ``defenders`` stage now trains every *observable* defender (``kind: dp_sgd``,
``kind: python`` with ``observable: true``) inside :func:`privaudit.hooks.recording`: the gradient
canary is a shadow (measured on a copy of the clipped sum, never in the step), so the released
weights are bit for bit those of an unwatched run (``tests/whitebox/test_release_run.py``), and
the observations (Nasr et al. 2023 threat model: every intermediate update visible) are pooled
with the audit runs.

- :func:`record_release` runs one training call under a recording → the model and a
  :class:`ReleaseWatch` (observations, or why there are none; what changed outside the watched steps);
- :func:`release_canary_seed` is the canary stream of the release run (``base.seed, "defenders",
  <name>, "release-canary"``: never a stream of the audit runs);
- :func:`write_release_watch` / :func:`read_release_watch` store it in ``data/defenders/<name>/``
  (:data:`WATCH_FILE` and :data:`OBSERVATIONS_FILE`); :func:`save_observations` /
  :func:`load_observations` are the typed npz form of one
  :class:`~privaudit.stats.observations.RunObservations`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

from privaudit import hooks
from privaudit.artifacts import atomic_file, read_json, write_json
from privaudit.seeding import int_seed
from privaudit.stats.observations import RunObservations

__all__ = ["OBSERVATIONS_FILE", "WATCH_FILE", "ReleaseWatch", "load_observations", "read_release_watch",
           "record_release", "release_canary_seed", "save_observations", "write_release_watch"]

#: the release run's observations in ``data/defenders/<name>/``
OBSERVATIONS_FILE = "release_observations.npz"
#: what the recording of the release run found (:class:`ReleaseWatch` without the arrays)
WATCH_FILE = "release_watch.json"

_M = TypeVar("_M")
_ARRAYS = ("batch_rows", "sensitivity", "noise_sq", "noise_quartic", "noise_cos", "coord_sq")
_OPTIONAL_ARRAYS = ("noise_scale", "coord_sq_scaled")
_DECLARED = ("declared_dataset_size", "declared_noise_multiplier", "declared_max_grad_norm")


@dataclass(frozen=True)
class ReleaseWatch:
    """What the recording of one release run saw.

    Attributes:
        seed: the seed of the recording's canary directions (:func:`release_canary_seed`).
        canary_scale: M of the gradient canary ``M·C·u`` (``whitebox.canary_scale``).
        observations: the run's observations; ``None`` when it was not observed (``reason`` says why).
        changes: what reached the released model outside the watched DP steps
            (:meth:`privaudit.hooks.Recording.release_changes`); empty when nothing did.
        reason: why there are no observations (the trainer never called ``privaudit.hooks.watch``,
            or its watched optimizer never added noise); ``None`` when observed.
        unmeasured_steps: steps that added noise without a ``clip_and_accumulate`` call.
        observing_seconds: what the recording itself cost in the run
            (:attr:`privaudit.hooks.Recording.observing_seconds`): a measurement for the plan, not compared and
            not written (:func:`write_release_watch`).
    """

    seed: int
    canary_scale: float
    observations: RunObservations | None
    changes: tuple[str, ...] = ()
    reason: str | None = None
    unmeasured_steps: int = 0
    observing_seconds: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        if not (isinstance(self.canary_scale, (int, float)) and math.isfinite(self.canary_scale)
                and self.canary_scale > 1):
            raise ValueError(f"canary_scale must be a finite number > 1, got {self.canary_scale!r}")
        if (self.observations is None) == (self.reason is None):
            raise ValueError("a ReleaseWatch has either observations or the reason it has none, not both or neither "
                             f"(observations={'set' if self.observations is not None else None}, "
                             f"reason={self.reason!r})")
        object.__setattr__(self, "changes", tuple(str(c) for c in self.changes))

    @property
    def observed(self) -> bool:
        """Whether the release run was observed (its observations can be pooled)."""
        return self.observations is not None

    def summary(self) -> str:
        """One line for the stage log."""
        if self.observations is None:
            return f"release run NOT observed ({self.reason})"
        extra = f"; {len(self.changes)} change(s) outside watched steps" if self.changes else ""
        return f"release run observed ({self.observations.steps} steps{extra})"


def release_canary_seed(base_seed: int, defender: str) -> int:
    """The canary seed of ``defender``'s release run: its own stream, ``int_seed(base.seed, "defenders",
    defender, "release-canary")`` (the release fit uses ``int_seed(base.seed, "defenders", defender)``;
    the audit runs use the ``whitebox`` streams)."""
    return int_seed(int(base_seed), "defenders", defender, "release-canary")


def record_release(fit: Callable[[], _M], *, seed: int, canary_scale: float) -> tuple[_M, ReleaseWatch]:
    """Run ``fit()`` (one release training) inside :func:`privaudit.hooks.recording`.

    The recording never changes what ``fit`` releases (the canary is a shadow; see
    :mod:`privaudit.hooks`). A trainer that never calls ``privaudit.hooks.watch``, or whose
    watched optimizer never adds noise, gives a :class:`ReleaseWatch` without observations and
    the reason; an error of ``watch`` itself (not a DPOptimizer, ghost clipping) propagates.

    Returns:
        ``(model, watch)``: ``fit``'s return value and what the recording saw.
    """
    with hooks.recording(seed=seed, canary_scale=canary_scale) as rec:
        model = fit()
        changes = rec.release_changes(model) if rec.optimizers else []
    if rec.optimizers == 0:
        return model, ReleaseWatch(seed=int(seed), canary_scale=float(canary_scale), observations=None,
                                   reason="the trainer never called privaudit.hooks.watch(optimizer, "
                                          "dataset_size=len(X)) during the release run")
    try:
        obs = rec.observations()
    except ValueError as err:
        return model, ReleaseWatch(seed=int(seed), canary_scale=float(canary_scale), observations=None,
                                   reason=f"{err} during the release run", changes=tuple(changes))
    return model, ReleaseWatch(seed=int(seed), canary_scale=float(canary_scale), observations=obs,
                               changes=tuple(changes), unmeasured_steps=rec.unmeasured_steps,
                               observing_seconds=rec.observing_seconds)


# --------------------------------------------------------------------------- files


def save_observations(path: str | Path, obs: RunObservations) -> None:
    """Write ``obs`` to ``path`` as an uncompressed npz (atomic; byte-stable for equal observations).

    Arrays under their field names; an optional array or declared value that is ``None`` is left out.
    """
    if not isinstance(obs, RunObservations):
        raise ValueError(f"obs must be a RunObservations, got {type(obs).__name__}")
    arrays: dict[str, np.ndarray] = {name: np.asarray(getattr(obs, name)) for name in _ARRAYS}
    for name in _OPTIONAL_ARRAYS:
        value = getattr(obs, name)
        if value is not None:
            arrays[name] = np.asarray(value)
    for name in _DECLARED:
        value = getattr(obs, name)
        if value is not None:
            arrays[name] = np.asarray(value, dtype=np.int64 if name == "declared_dataset_size" else np.float64)
    with atomic_file(path, "wb") as fh:
        np.savez(fh, **arrays)


def load_observations(path: str | Path) -> RunObservations:
    """Read a :func:`save_observations` file (no pickles); checked by :class:`RunObservations` itself.

    Raises:
        FileNotFoundError: ``path`` does not exist (names it).
        ValueError: not an npz of observations, a key missing or unknown, or values the record
            refuses (names the file and the key).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p} not found (written by the defenders stage for observable defenders: dvc repro "
                                "defenders)")
    try:
        with np.load(p, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as err:
        raise ValueError(f"{p} is not a readable npz of release-run observations ({err}); rerun the defenders "
                         "stage") from None
    missing = [k for k in _ARRAYS if k not in data]
    unknown = sorted(set(data) - set(_ARRAYS) - set(_OPTIONAL_ARRAYS) - set(_DECLARED))
    if missing or unknown:
        raise ValueError(f"{p}: missing keys {missing} / unknown keys {unknown} (expected {list(_ARRAYS)} and "
                         f"optionally {list(_OPTIONAL_ARRAYS + _DECLARED)}); rerun the defenders stage")
    declared: dict[str, Any] = {}
    for name in _DECLARED:
        if name in data:
            v = data[name]
            if v.shape != ():
                raise ValueError(f"{p}: {name} must be a scalar, got shape {v.shape}")
            declared[name] = int(v) if name == "declared_dataset_size" else float(v)
    try:
        return RunObservations(**{k: data[k] for k in _ARRAYS}, **{k: data.get(k) for k in _OPTIONAL_ARRAYS},
                               **declared)
    except ValueError as err:
        raise ValueError(f"{p}: {err}") from None


def write_release_watch(out_dir: str | Path, watch: ReleaseWatch) -> None:
    """Write ``watch`` into ``out_dir`` (a defender's folder): :data:`WATCH_FILE`, and
    :data:`OBSERVATIONS_FILE` when the run was observed."""
    if not isinstance(watch, ReleaseWatch):
        raise ValueError(f"watch must be a ReleaseWatch, got {type(watch).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if watch.observations is not None:
        save_observations(out / OBSERVATIONS_FILE, watch.observations)
    write_json(out / WATCH_FILE, {
        "observed": watch.observed,
        "observations_file": OBSERVATIONS_FILE if watch.observed else None,
        "seed": int(watch.seed),
        "canary_scale": float(watch.canary_scale),
        "steps": watch.observations.steps if watch.observations is not None else 0,
        "changes": list(watch.changes),
        "reason": watch.reason,
        "unmeasured_steps": int(watch.unmeasured_steps),
    })


def read_release_watch(defender_dir: str | Path) -> ReleaseWatch:
    """The :class:`ReleaseWatch` the defenders stage wrote into ``defender_dir``.

    Raises:
        FileNotFoundError: no :data:`WATCH_FILE` there (a folder from before issue 27, or a defender
            that is not observable): the message says to rerun the defenders stage.
        ValueError: a corrupt file (names it and the key).
    """
    d = Path(defender_dir)
    path = d / WATCH_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the release run of this observable defender was not recorded; "
                                "rerun the defenders stage (dvc repro defenders)")
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(raw).__name__}; rerun the defenders stage")
    need = ("observed", "seed", "canary_scale", "changes", "reason")
    missing = [k for k in need if k not in raw]
    if missing:
        raise ValueError(f"{path} lacks {missing}; rerun the defenders stage")
    if not isinstance(raw["observed"], bool) or not isinstance(raw["changes"], list):
        raise ValueError(f"{path}: 'observed' must be a bool and 'changes' a list, got {raw['observed']!r} and "
                         f"{type(raw['changes']).__name__}")
    obs = load_observations(d / OBSERVATIONS_FILE) if raw["observed"] else None
    try:
        return ReleaseWatch(seed=raw["seed"], canary_scale=raw["canary_scale"], observations=obs,
                            changes=tuple(raw["changes"]), reason=raw["reason"],
                            unmeasured_steps=int(raw.get("unmeasured_steps", 0)))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
