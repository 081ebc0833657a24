"""White-box audit of a DP-SGD trainer: run it under :mod:`privaudit.hooks`, estimate ε̂.

:func:`whitebox_audit` trains the recipe ``runs`` times, each inside
:func:`privaudit.hooks.recording`, pools what the hook saw in the opacus ``DPOptimizer``
(batch sizes, the clipped canary's effect, the noise) and calls
:func:`privaudit.stats.whitebox.estimate_whitebox`.  The trainer must call
``privaudit.hooks.watch(optimizer, dataset_size=len(X))`` after building its ``DPOptimizer``:
privaudit's ``dp_sgd`` defender does; a user's ``kind: python`` trainer must.  When it does not,
:class:`privaudit.hooks.WatchNotCalledError` (a ValueError) names the trainer — callers fall
back to black-box audits.

Guarantee (see :mod:`privaudit.stats.whitebox`): under the stated modelling assumption, with
probability ≥ 1 − ``level``, the returned ``epsilon`` does not exceed the ε that the chosen opacus
accountant certifies for the mechanism the trainer's code actually runs (its real noise scale,
clipping, sampling rate and number of steps), with the data-set size ``len(X)`` given here —
never the size the trainer declares.  A recipe whose claimed ε is below ``epsilon``, or whose
model checks fail (``result.checks_passed`` is False), is refuted.

The audit runs are not the release run: each uses seeds derived from ``seed``, never the release
seed. The release run is watched too (issue 27): the ``defenders`` stage trains every observable
defender inside a recording (:mod:`privaudit.defenders.release_watch`; the shadow canary leaves the
released bits unchanged), and :func:`run` pools its observations with the audit runs (``release=``
of :func:`whitebox_audit`) and fails the audit when something reached the released model outside
the watched steps, or when the release run was not observed although the audit runs were. A loop
that behaves differently when not audited — one that branches on ``privaudit.hooks.is_recording()``
(true in the release run as well) or on being called for the first time — is thereby measured in
the run that produced the released model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.audits.protocol import PURE_DELTA, AuditBound, AuditInputs, AuditRequest, finite_epsilon
from privaudit import hooks
from privaudit.compat.opacus_warnings import opacus_noise_filtered
from privaudit.defenders.release_watch import ReleaseWatch, read_release_watch
from privaudit.defenders.specs import DefenderSpecBase, PythonSpec
from privaudit.seeding import int_seed
from privaudit.stats.observations import RunObservations
from privaudit.stats.whitebox import WhiteboxResult, estimate_whitebox, with_notes, with_release_changes

__all__ = ["CITATION", "SETTINGS", "WhiteboxSettings", "WhiteboxResult", "defender_trainer", "python_trainer", "run", "whitebox_audit", "whitebox_audit_heads",
           "whitebox_metrics"]

FitFn = Callable[[np.ndarray, np.ndarray, int], Any]


class _HasFit(Protocol):
    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> Any: ...


def python_trainer(train: Callable[..., Any], n_classes: int, **options: Any) -> FitFn:
    """A ``fit(X, y, seed)`` for a ``kind: python`` trainer ``train(X, y, n_classes, seed, **options)``."""
    if not callable(train):
        raise ValueError(f"train must be callable train(X, y, n_classes, seed, **options), got {train!r}")

    def fit(X: np.ndarray, y: np.ndarray, seed: int) -> Any:
        return train(X, y, n_classes, seed, **options)

    fit.__qualname__ = getattr(train, "__qualname__", repr(train))
    fit.__module__ = getattr(train, "__module__", __name__)
    return fit


def defender_trainer(factory: Callable[[], _HasFit]) -> FitFn:
    """A ``fit(X, y, seed)`` that builds a fresh defender with ``factory()`` each run and fits it."""
    if not callable(factory):
        raise ValueError(f"factory must be a callable returning a defender, got {factory!r}")

    def fit(X: np.ndarray, y: np.ndarray, seed: int) -> Any:
        return factory().fit(X, y, seed)

    fit.__qualname__ = f"defender_trainer({getattr(factory, '__qualname__', repr(factory))})"
    return fit


def _trainer_name(trainer: Any) -> str:
    spec = getattr(trainer, "spec", None)  # a Defender's validated spec; any trainer may come here
    if isinstance(spec, PythonSpec):  # a kind: python defender
        return f"{spec.target} (defender {spec.name!r})"
    if isinstance(spec, DefenderSpecBase):
        return f"{type(trainer).__name__}.fit (defender {spec.name!r})"
    mod = getattr(trainer, "__module__", None)
    name = getattr(trainer, "__qualname__", None) or repr(trainer)
    return f"{mod}.{name}" if mod else name


@dataclass(frozen=True)
class _RecordedRun:
    """What one recorded audit run left (picklable: it comes back from a worker process)."""

    optimizers: int
    observations: RunObservations | None
    error: str | None  # why ``observations`` is None (the recording's ValueError)
    changes: tuple[str, ...]
    unmeasured_steps: int
    declared_dataset_sizes: tuple[int, ...]


def _record_run(fit: Callable[[np.ndarray, np.ndarray, int], Any], X: np.ndarray, y: np.ndarray, seed: int,
                canary_scale: float, i: int) -> _RecordedRun:
    """Audit run ``i``: ``fit`` inside a recording with the run's own seeds (here or in a worker process; on one
    torch and one BLAS thread wherever it runs, as the stage's fits, so that its bits do not depend on where)."""
    from privaudit.repro.threads import one_thread

    with one_thread(), hooks.recording(seed=int_seed(int(seed), "whitebox", "canary", i), canary_scale=canary_scale) as rec:
        model = fit(X, y, int_seed(int(seed), "whitebox", "fit", i))
        changes = tuple(f"run {i}: {c}" for c in rec.release_changes(model))
    obs, error = None, None
    if rec.optimizers:
        try:
            obs = rec.observations()
        except ValueError as err:
            error = str(err)
    return _RecordedRun(rec.optimizers, obs, error, changes, rec.unmeasured_steps,
                        tuple(int(s) for s in rec.declared_dataset_sizes))


def whitebox_audit(trainer: FitFn | _HasFit, X: np.ndarray, y: np.ndarray, *, runs: int = 2, delta: float = 1e-5,
                   level: float, accountant: str = "prv", seed: int = 0,
                   canary_scale: float = 4.0, release: ReleaseWatch | None = None, workers: int = 1) -> WhiteboxResult:
    """Audit a DP-SGD trainer white-box: ``runs`` recorded training runs → ε̂ (a lower confidence bound).

    With ``release`` (what the recording of the release run saw, :mod:`privaudit.defenders.release_watch`)
    the release run is pooled first, then the ``runs`` audit runs (``result.runs`` counts it);
    whatever reached the released model outside its watched steps fails the check
    ``release_model_watched`` (ε̂ = ∞, the tensor named, prefixed ``release run:``), and so does a
    release run that was not observed although the audit runs were (a loop that watches its optimizer
    only when audited), or one that trained another number of parameters than the audit runs.

    Args:
        trainer: ``fit(X, y, seed)`` (see :func:`python_trainer`, :func:`defender_trainer`) or an
            object with ``.fit(X, y, seed)`` (e.g. a privaudit defender; refitted in place each run,
            so pass a throwaway one).  Its loop must call ``privaudit.hooks.watch(opt, dataset_size=...)``.
        X: (n, d) training features, exactly as the release run gets them.
        y: (n,) labels.
        runs: audit training runs (≥ 1); their observations are pooled (more steps, tighter bounds).
        delta: δ at which ε̂ is reported (the claim's δ).
        level: total failure probability of the audit (Bonferroni over bounds and checks).
        accountant: opacus accountant 'prv' (default), 'rdp' or 'gdp' — use the claim's accountant.
        seed: root of the audit's seeds (run i trains with ``int_seed(seed, "whitebox", "fit", i)``;
            its canaries use ``int_seed(seed, "whitebox", "canary", i)``).
        canary_scale: M of the gradient canary ``M·C·u`` (> 1; 4 by default).
        release: the release run's :class:`~privaudit.defenders.release_watch.ReleaseWatch`, recorded
            with the same ``canary_scale`` on the same ``X`` (``None``: audit runs only).
        workers: local processes the runs are spread over (forked from this one, at most ``runs``; where a fork is
            refused — another thread running, CUDA initialised here — they run here one after the other). Each run
            trains on one torch and one BLAS thread wherever it runs: the same bits for any ``workers``.

    Returns:
        :class:`~privaudit.stats.whitebox.WhiteboxResult` (``epsilon`` = ε̂, the checks, the
        assumption text, ``dataset_size = len(X)``).

    Raises:
        privaudit.hooks.WatchNotCalledError: (a ValueError) the trainer never called
            ``privaudit.hooks.watch``; the message names the trainer.
        ValueError: bad arguments (named), the trainer stepped no watched optimizer, or ``release``
            was recorded with another ``canary_scale`` (a stale ``data/defenders``).
    """
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not (isinstance(delta, (int, float)) and 0 < float(delta) < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if not (isinstance(level, (int, float)) and 0 < float(level) < 1):
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    if accountant not in ("rdp", "prv", "gdp"):
        raise ValueError(f"accountant must be 'rdp', 'prv' or 'gdp', got {accountant!r}")
    if not (isinstance(canary_scale, (int, float)) and math.isfinite(canary_scale) and canary_scale > 1):
        raise ValueError(f"canary_scale must be a finite number > 1, got {canary_scale!r}")
    if release is not None and not isinstance(release, ReleaseWatch):
        raise ValueError(f"release must be a ReleaseWatch (privaudit.defenders.release_watch) or None, got "
                         f"{type(release).__name__}")
    if release is not None and float(release.canary_scale) != float(canary_scale):
        raise ValueError(f"the release run was recorded with canary_scale={release.canary_scale} but the audit uses "
                         f"{canary_scale}: data/defenders is stale; rerun the defenders stage (dvc repro defenders)")
    X_arr, y_arr = np.asarray(X), np.asarray(y)
    if X_arr.ndim != 2 or X_arr.shape[0] < 1:
        raise ValueError(f"X must be a non-empty (n, d) array, got shape {X_arr.shape}")
    if y_arr.shape != (X_arr.shape[0],):
        raise ValueError(f"y must have shape ({X_arr.shape[0]},) to match X, got {y_arr.shape}")
    if callable(getattr(trainer, "fit", None)):
        fit: Callable[[np.ndarray, np.ndarray, int], Any] = trainer.fit  # type: ignore[union-attr]
    elif callable(trainer):
        fit = trainer
    else:
        raise ValueError(f"trainer must be fit(X, y, seed) or an object with .fit(X, y, seed), got {trainer!r}")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    name = _trainer_name(trainer)
    n = int(X_arr.shape[0])
    observed = []
    notes: list[str] = []
    changes: list[str] = []
    if workers > 1 and runs > 1:
        from privaudit.repro.worker_pool import map_in_processes

        recorded = map_in_processes(_record_run, [(i,) for i in range(int(runs))], min(int(workers), int(runs)),
                                    shared=(fit, X, y, int(seed), float(canary_scale)), fork_only=True)
    else:
        recorded = (_record_run(fit, X, y, int(seed), float(canary_scale), i) for i in range(int(runs)))
    for i, rec in enumerate(recorded):  # in run order, whatever ran them
        changes.extend(rec.changes)
        if rec.optimizers == 0:
            raise hooks.WatchNotCalledError(
                f"trainer {name} never called privaudit.hooks.watch(optimizer, dataset_size=len(X)) during audit "
                f"run {i}: a white-box audit needs the trainer to hand its opacus DPOptimizer to privaudit.hooks.watch "
                "right after building it (fall back to black-box audits otherwise)")
        if rec.observations is None:
            raise ValueError(f"trainer {name}: {rec.error}")
        obs = rec.observations
        if rec.unmeasured_steps:
            notes.append(f"run {i}: {rec.unmeasured_steps} steps added noise without a clip_and_accumulate call "
                         "(sensitivity not measured there)")
        bad = sorted({s for s in rec.declared_dataset_sizes if s != n})
        if bad:
            notes.append(f"run {i}: the trainer declared dataset_size={bad} to hooks.watch but trained on "
                         f"len(X)={n}; the audit uses {n}")
        observed.append(obs)
    if release is not None:
        pooled_release, release_changes, release_notes = _release_part(release, observed[0], n)
        observed = pooled_release + observed
        changes = release_changes + changes
        notes = release_notes + notes
    result = pooled_estimate(observed, dataset_size=n, delta=delta, level=level, accountant=accountant,
                             canary_scale=canary_scale)
    result = with_release_changes(result, changes)
    return with_notes(result, *notes) if notes else result


def pooled_estimate(runs: list[RunObservations], *, dataset_size: int, delta: float, level: float, accountant: str,
                    canary_scale: float) -> WhiteboxResult:
    """ε̂ of the pooled ``runs`` (:func:`privaudit.stats.whitebox.estimate_whitebox`), with opacus's accountant
    noise filtered (PRV's domain sizing warns through RDP: :mod:`privaudit.compat.opacus_warnings`)."""
    with opacus_noise_filtered(accountant):
        return estimate_whitebox(runs, dataset_size=int(dataset_size), delta=float(delta), level=float(level),
                                 accountant=accountant, canary_scale=float(canary_scale))


def _release_part(release: ReleaseWatch, audit_run: RunObservations,
                  n: int) -> tuple[list[RunObservations], list[str], list[str]]:
    """What the release run adds to the pool: its observations (or none), its changes, its notes."""
    changes = [f"release run: {c}" for c in release.changes]
    notes: list[str] = []
    obs = release.observations
    if obs is None:
        changes.insert(0, f"release run: not observed ({release.reason}) although the audit runs were: the "
                          "released model was trained by a loop the audit did not see")
        return [], changes, notes
    if obs.dimension != audit_run.dimension:
        changes.insert(0, f"release run: it trained {obs.dimension} parameters, the audit runs "
                          f"{audit_run.dimension}: the released model is not the recipe the audit ran")
        return [], changes, notes
    if release.unmeasured_steps:
        notes.append(f"release run: {release.unmeasured_steps} steps added noise without a clip_and_accumulate "
                     "call (sensitivity not measured there)")
    if obs.declared_dataset_size is not None and obs.declared_dataset_size != n:
        notes.append(f"release run: the trainer declared dataset_size={obs.declared_dataset_size} to hooks.watch "
                     f"but trained on len(X)={n}; the audit uses {n}")
    return [obs], changes, notes


def whitebox_audit_heads(recipe: Any, X: np.ndarray, y: np.ndarray, n_classes: int, *, models: int = 16,
                         delta: float = 1e-5, level: float, accountant: str = "prv", seed: int = 0,
                         canary_scale: float = 4.0, device: str = "cpu") -> WhiteboxResult:
    """White-box audit of the batched DP-SGD trainer (:func:`privaudit.train.train_heads`): ``models`` runs at once.

    The same estimator as :func:`whitebox_audit`, fed by :class:`privaudit.train.observe.HeadsObserver`
    instead of the opacus hook: ``models`` heads train together on ``X``, every step each gets its
    own gradient canary, and each head's batch sizes, canary effects and noise are one
    :class:`~privaudit.stats.observations.RunObservations` (no per-model Python loop while training).

    Args:
        recipe: a :class:`privaudit.train.HeadRecipe` with ``dp`` set (e.g. from ``recipe_from_spec``).
        X, y: the training rows (n, d) and labels (n,); ``n_classes``: C.
        models: audit runs trained together (≥ 1).
        seed: training draws from ``int_seed(seed, "whitebox", "heads")``, canaries from
            ``int_seed(seed, "whitebox", "heads-canary")``.
        Other arguments as in :func:`whitebox_audit`.
    """
    import torch

    from privaudit.train import TrainData, train_heads
    from privaudit.train.observe import HeadsObserver

    if getattr(recipe, "dp", None) is None:
        raise ValueError("recipe must be a DP-SGD HeadRecipe (recipe.dp set): plain SGD adds no noise to audit")
    if isinstance(models, bool) or not isinstance(models, (int, np.integer)) or models < 1:
        raise ValueError(f"models must be an int >= 1, got {models!r}")
    X_arr, y_arr = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)
    if X_arr.ndim != 2 or X_arr.shape[0] < 1 or y_arr.shape != (X_arr.shape[0],):
        raise ValueError(f"X must be (n, d) and y (n,), got {X_arr.shape} and {y_arr.shape}")
    observer = HeadsObserver(seed=int_seed(int(seed), "whitebox", "heads-canary"), canary_scale=canary_scale)
    data = TrainData(torch.tensor(X_arr, device=device), torch.tensor(y_arr, device=device), n_models=int(models))
    gen = torch.Generator(device=device).manual_seed(int_seed(int(seed), "whitebox", "heads"))
    train_heads(recipe, data, int(n_classes), gen, observer=observer)
    n = int(X_arr.shape[0])
    return pooled_estimate(observer.runs(dataset_size=n), dataset_size=n, delta=delta, level=level,
                           accountant=accountant, canary_scale=canary_scale)


#: the paper and equation of the bound (shown in the report; the module docstring gives the derivation)
CITATION = ("Nasr et al. 2023, 'Tight Auditing of Differentially Private Machine Learning' (white-box threat model, "
            "gradient canaries); Andrew et al. 2024 (random canary); ε̂ = opacus accountant(s_U/Δ, q_L, T, δ) "
            "with the bounds of privaudit.stats.whitebox")


@dataclass(frozen=True)
class WhiteboxSettings:
    """The ``whitebox.*`` params the audit reads: recorded audit runs and the gradient canary's scale."""

    runs: int
    canary_scale: float


#: this audit's settings type (:func:`privaudit.audits.protocol.settings_from`)
SETTINGS = WhiteboxSettings


def estimate_settings(request: AuditRequest) -> tuple[float, str]:
    """The δ (the claim's add/remove δ, at least :data:`PURE_DELTA`) and the accountant (the defender's own; ``prv``
    for kinds that name none) at which :func:`run` estimates ε̂ for ``request``."""
    from privaudit.defenders.specs import DpSgdSpec

    spec = request.spec
    accountant = spec.accountant if isinstance(spec, (DpSgdSpec, PythonSpec)) else "prv"
    return max(request.delta(Neighbourhood.ADD_REMOVE), PURE_DELTA), accountant


def run(request: AuditRequest, inputs: AuditInputs, settings: WhiteboxSettings) -> AuditBound:
    """The white-box audit of one observable defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    The trainer is run ``settings.runs`` times on the Defender set — the data the released model
    is trained on — with :func:`privaudit.hooks.watch` recording its opacus ``DPOptimizer`` and a
    gradient canary of norm ``settings.canary_scale`` × C, at ``request.level`` and the claim's δ
    for add/remove. ``settings``: the ``whitebox`` params block (``runs``, ``canary_scale``).
    With ``inputs.defenders_dir`` (the stage always passes ``data/defenders``) the release run the
    defenders stage recorded (``<name>/release_watch.json``) is pooled with them; the block records
    ``release_run_observed``, ``audit_runs`` and ``runs`` (the pooled runs, the release run included).

    Raises:
        ValueError: the trainer never calls ``privaudit.hooks.watch`` (a ``kind: python`` defender
            declared ``observable: true`` wrongly), naming the defender and the fix; the release
            record is missing or stale (``data/defenders/<name>/release_watch.json``: rerun the defenders stage).
    """
    data = inputs.need_defender_data("whitebox")
    spec = request.spec
    delta = request.delta(Neighbourhood.ADD_REMOVE)
    release = None
    if inputs.defenders_dir is not None:
        try:
            release = read_release_watch(inputs.defenders_dir / spec.name)
        except (FileNotFoundError, ValueError) as err:
            raise ValueError(f"defender {spec.name!r}: {err}") from None
    estimate_delta, accountant = estimate_settings(request)
    try:
        res = whitebox_audit(defender_trainer(request.trainer(data.n_classes)), data.X, data.y, runs=settings.runs,
                             delta=estimate_delta, level=request.level, accountant=accountant,
                             seed=request.int_seed("whitebox"), canary_scale=settings.canary_scale, release=release,
                             workers=inputs.workers)
    except hooks.WatchNotCalledError as err:
        raise ValueError(f"defender {spec.name!r} declares observable: true but {err}; call "
                         "privaudit.hooks.watch(optimizer, dataset_size=len(X)) in its training loop, or set "
                         f"observable: false") from None
    block = whitebox_metrics(res, delta=delta, level=request.level)
    block["audit_runs"] = int(settings.runs)
    block["release_run_observed"] = res.runs > settings.runs  # the release run is in the pool
    claimed = request.claim.epsilon if request.claim else None
    pooled = ("the release run and " if block["release_run_observed"] else "") + f"{settings.runs} audit runs"
    line = (f"whitebox: {spec.name}: eps_hat={block['eps_lower_bound']:.4g} at delta={block['delta']:.3g} "
            f"({block['runs']} runs pooled: {pooled}; {block['steps']} steps; claimed {claimed}); "
            f"checks {'passed' if not block['failed_checks'] else 'FAILED: ' + '; '.join(block['failed_checks'])}")
    return AuditBound(epsilon=res.epsilon, level=request.level, delta=delta, neighbourhood=res.neighbourhood,
                      threat_model=res.threat_model, assumption=res.assumption, checks=block["checks"],
                      diagnostics=block, lines=(line,))


def whitebox_metrics(res: WhiteboxResult, *, delta: float, level: float) -> dict[str, Any]:
    """The ``whitebox`` block of ``metrics/audit.json`` for a :class:`~privaudit.stats.whitebox.WhiteboxResult`
    computed for a claim at ``delta`` (add/remove) and budget share ``level``; ε̂ = +∞ (no noise seen,
    or reused noise) is stored as :data:`~privaudit.audits.protocol.EPS_UNBOUNDED` with ``unbounded: true``."""
    eps, unbounded = finite_epsilon(res.epsilon)
    failed = [c for c in res.checks if not c.passed]
    return {
        "eps_lower_bound": eps,
        "unbounded": unbounded,
        "eps_point": finite_epsilon(res.epsilon_point)[0],
        "delta": delta,
        "neighbourhood": res.neighbourhood,
        "threat_model": res.threat_model,
        "assumption": res.assumption,
        "runs": res.runs,
        "steps": res.total_steps,
        "level": level,
        "accountant": res.accountant,
        "noise_multiplier_upper": finite_epsilon(res.noise_multiplier)[0],
        "noise_multiplier_point": finite_epsilon(res.noise_multiplier_point)[0],
        "declared_noise_multiplier": res.declared_noise_multiplier,
        "sensitivity": res.sensitivity,
        "sample_rate_lower": res.sample_rate_lower,
        "sample_rate_point": res.sample_rate_point,
        "checks": {c.name: bool(c.passed) for c in res.checks},
        "failed_checks": [_check_reason(c) for c in failed],
        "method": res.epsilon_method,
        "reasons": list(res.reasons),
    }


def _check_reason(check: Any) -> str:
    return f"{check.name}: {check.detail}" if check.detail else check.name
