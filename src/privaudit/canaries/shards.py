"""Trial shards of the canary audits: plan, run, store, resume.

A *shard* is a contiguous range ``[start, stop)`` of trials of one experiment of one defender:
LiDP trials (Pillutla et al. 2023, Algorithm 1 lines 2-6), Game-3 runs (Malek et al. 2021,
App. B; one run by default, ``game3.runs`` > 1 for the Table-5 check) or the many-run black-box
audit's models (:mod:`privaudit.canaries.blackbox_trials`; trial t trains with the crafted canary iff
t is even). Trial t draws its canaries
from ``rng_for(base.seed, "canaries", <experiment>, <defender>, t)``; the models of a block of
``compute.block_trials`` trials are trained together with a generator seeded from the block
index. Shards are whole blocks, so a shard's numbers do not depend on how the trials were cut
into shards, nor on where the shard ran (locally, a Dask worker, a Prefect task).

Finished shards are kept in a store *outside* the DVC outs of the canaries stage (DVC deletes a
stage's outs before re-running it, which would throw finished work away)::

    <root>/<key>/<defender>-<spec hash>/<experiment>-<start>-<stop>.npz

``root`` is ``data/.shards/canaries`` (git- and DVC-ignored) and ``key`` a hash of everything
that decides the shards' numbers: the code of the whole privaudit package
(:func:`code_fingerprint`), the versions of the numeric packages, the resolved device and the
``PRIVAUDIT_NATIVE`` switch (:func:`environment_fingerprint`), the params that enter the training
(``base.seed``, ``base.device``, ``compute.block_trials``, the ``game3``/``lidp`` keys of the
canary draws); one sub-directory per defender keyed by its spec and, for a ``kind: python``
defender, by the content of its trainer/loader files and the local modules they import
(:attr:`CanaryPlan.user_code`). The key is computed where the stage runs: Dask workers are
expected to run the same code and packages (the same environment). The inputs (features + split) are
fingerprinted into every shard (``inputs_fingerprint``); :func:`missing_shards` with ``fs``
treats a shard of other inputs as missing (it is then recomputed and overwritten). A shard is
written atomically (temporary file, then rename), so a killed process leaves either a complete
shard or none.

Decision (resume vs DVC): the store lives outside the stage's ``outs`` rather than using
``persist: true``, so ``dvc repro`` keeps its usual clean-outs semantics while finished trials
survive a kill; a Prefect/Dask pre-run that saved shards here is picked up by the stage.
Shards of other keys (old params or code) and of defenders no longer in the params are deleted by
:func:`prune_shards`, which the canaries stage calls after it has assembled its outputs
(``compute.prune_shards: false`` keeps them; ``rm -r data/.shards`` frees everything).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from privaudit.artifacts import atomic_file
from privaudit.canaries.plan import CanaryPlan
from privaudit.defenders.specs import BATCHED_KINDS, HOST_ONLY_KINDS
from privaudit.features.feature_set import FeatureSet

DEFAULT_SHARD_ROOT = Path("data/.shards/canaries")

Experiment = Literal["game3", "lidp", "blackbox"]
EXPERIMENTS: tuple[Experiment, ...] = ("game3", "lidp", "blackbox")


@dataclass(frozen=True)
class Shard:
    """Trials ``[start, stop)`` of ``experiment`` for ``defender``."""

    defender: str
    experiment: Experiment
    start: int
    stop: int

    @property
    def filename(self) -> str:
        return f"{self.experiment}-{self.start:06d}-{self.stop:06d}.npz"


def _block(plan: CanaryPlan) -> int:
    return int(plan.compute.block_trials)


def plan_shards(plan: CanaryPlan, shard_size: int | None = None) -> list[Shard]:
    """All shards of the canary stage, in a fixed order (defenders as in params; game3, lidp, blackbox).

    ``shard_size`` (default ``compute.shard_trials``) is rounded up to whole blocks of
    ``compute.block_trials`` trials, the unit of randomness (black-box runs: whole
    :meth:`CanaryPlan.blackbox_block` blocks); a defender without a batched recipe (one fit per trial) gets
    shards of one block.
    """
    block = _block(plan)
    size = int(shard_size or plan.compute.shard_trials)
    if size < 1:
        raise ValueError(f"shard_size must be >= 1, got {size}")
    size = -(-size // block) * block
    out = []
    for spec in plan.defenders:
        for exp in EXPERIMENTS:
            n = plan.trials(exp, spec.name)
            # one fit per trial (no batched recipe): shards of one block, so that local workers share the
            # fits evenly and a killed stage or a progress line is at most one block of fits behind
            step = size if spec.kind in BATCHED_KINDS else block
            if exp == "blackbox" and n:
                bb = plan.blackbox_block(spec.name)
                step = -(-max(step, bb) // bb) * bb  # whole black-box blocks
            out += [Shard(spec.name, exp, s, min(n, s + step)) for s in range(0, n, step)]
    return out


def inputs_fingerprint(fs: FeatureSet) -> str:
    """sha256 of the features, labels, ids, roles and class count (what the shards were computed on)."""
    h = hashlib.sha256()
    for a in (fs.X, fs.y, fs.is_defender):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update("\0".join(map(str, fs.ids)).encode())
    h.update(str(fs.n_classes).encode())
    return h.hexdigest()


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: installed packages whose numerics decide the shards (trainers, linear algebra, accountants)
NUMERIC_PACKAGES = ("numpy", "scipy", "scikit-learn", "torch", "opacus")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the whole privaudit package's code (every ``*.py`` and the ``*.c`` kernel source), so a
    changed privaudit, of whatever module, never reuses shards of the code before it. Computed once per
    process: the code a process runs is the code it imported."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(p for ext in ("*.py", "*.c") for p in pkg.rglob(ext)):
        h.update(f.relative_to(pkg).as_posix().encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def environment_fingerprint(device: str) -> dict[str, object]:
    """What outside the code decides a shard's bits: the numeric packages' versions, the device the
    trials train on (``base.device`` resolved) and whether the native library runs (``PRIVAUDIT_NATIVE``
    and a C compiler: the fused kernel differs from the torch path in the last bits, and DP-SGD's noise
    on the CPU comes from its own streams instead of ``torch.randn``)."""
    from privaudit.features import resolve_device
    from privaudit.train.native import linear_dp_kernel

    native = linear_dp_kernel() is not None  # None where PRIVAUDIT_NATIVE=0 or it cannot be built
    return {"packages": dict(_package_versions()), "device": resolve_device(device), "native": native}


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[tuple[str, str | None], ...]:
    from privaudit.repro.environment import package_versions

    return tuple(package_versions(NUMERIC_PACKAGES).items())


def shard_dir(root: Path, plan: CanaryPlan) -> Path:
    """Directory of the finished shards for this plan under ``root`` (see the module docstring)."""
    g, lp = plan.game3, plan.lidp
    key = {
        "format": 2, "code": code_fingerprint(), "env": environment_fingerprint(plan.device), "seed": plan.seed,
        "device": plan.device,
        "block_trials": plan.compute.block_trials,
        "game3": {"canaries": g.canaries, "runs": g.runs},
        "lidp": {"trials": lp.trials, "k": lp.k_canaries(), "m": lp.m_null(), "type": lp.canary_type,
                 "neighbourhood": lp.neighbourhood, "alpha": lp.clipbkd_alpha, "pool": lp.clipbkd_pool,
                 "gradient_norm": lp.gradient_norm, "gradient_reference": lp.gradient_reference},
    }
    bb = plan.blackbox
    if bb is not None:  # the black-box runs' settings (plans without them keep their old keys)
        key["blackbox"] = {"runs": bb.runs, "runs_no_claim": bb.runs_no_claim, "sequential": bb.sequential_runs,
                           "block": bb.block, "canary_scale": bb.canary_scale,
                           "observable": bb.observable_runs}
    return Path(root) / _digest(key)


def shard_path(root: Path, plan: CanaryPlan, shard: Shard) -> Path:
    """Where ``shard`` lives: ``shard_dir/<defender>-<hash>/<experiment>-<start>-<stop>.npz``; the hash covers the
    defender's spec, its black-box runs per side (as the plan stage sized them) and a ``kind: python``
    trainer's own files."""
    spec = plan.defender(shard.defender).model_dump(mode="json")
    user_code = plan.user_code_of(shard.defender)  # a kind: python trainer's own files (and local imports)
    key: dict[str, object] = {"spec": spec, "blackbox_runs": plan.blackbox_runs(shard.defender)}
    if user_code is not None:
        key["user_code"] = user_code
    digest = _digest(key)
    return shard_dir(root, plan) / f"{shard.defender}-{digest[:10]}" / shard.filename


def run_shard(plan: CanaryPlan, fs: FeatureSet, shard: Shard, device: str) -> dict[str, np.ndarray]:
    """Train the models of one shard and return its raw per-canary statistics (pure).

    Deterministic from ``base.seed`` (on one device). Keys: game3 — ``canary_index, true_label``
    (R, N), ``label_pair`` (R, N, 2), ``bit`` (R, N), ``proba`` (R, N, C); lidp — ``loss_in`` (t, K),
    ``loss_null`` (t, m); blackbox — ``score`` (t,), ``included`` (t,) 0/1; all — ``trial`` (t,) and
    ``inputs_fingerprint`` (0-d str).

    BLAS and OpenMP run on one thread here, wherever the shard runs (this process, a local worker, a Dask
    worker): a scikit-learn fit's sums are then added in one order, so the shard is the same bits for any
    ``compute.n_jobs`` (loky workers limit BLAS to cores / n_jobs threads, the stage's own process used
    every core: at 10k x 128 logistic-regression fits differed by up to 4e-5 between the two).
    """
    from privaudit.canaries.runner import run_trials
    from privaudit.repro.threads import one_thread

    with one_thread(torch_too=False):
        arrays = run_trials(plan, fs, shard.defender, shard.experiment, shard.start, shard.stop, device)
    arrays["trial"] = np.arange(shard.start, shard.stop)
    arrays["inputs_fingerprint"] = np.array(inputs_fingerprint(fs))
    return arrays


def _timed_shard(plan: CanaryPlan, fs: FeatureSet, shard: Shard, device: str) -> tuple[dict[str, np.ndarray], float]:
    """:func:`run_shard` and the seconds it took in the process that ran it (a measurement for the plan,
    :func:`privaudit.planning.timings.record_audit_fit_time`; never part of the shard)."""
    start = time.perf_counter()
    arrays = run_shard(plan, fs, shard, device)
    return arrays, time.perf_counter() - start


def _run_shard_on_worker(plan: CanaryPlan, fs: FeatureSet, shard: Shard,
                         device: str) -> tuple[dict[str, np.ndarray], float]:
    """:func:`_timed_shard` in a Dask worker's process, after the device's deterministic-kernel settings
    (:func:`privaudit.repro.determinism.configure_determinism`; the stage sets them only in its own process)."""
    from privaudit.repro.determinism import configure_determinism

    configure_determinism(device)
    return _timed_shard(plan, fs, shard, device)


def _run_shard_in_process(plan: CanaryPlan, fs: FeatureSet, shard: Shard,
                          device: str) -> tuple[Shard, dict[str, np.ndarray], float]:
    """:func:`_timed_shard` in a local worker process (one torch thread, deterministic kernels)."""
    import torch

    from privaudit.repro.determinism import configure_determinism

    torch.set_num_threads(1)
    configure_determinism(device)
    return (shard, *_timed_shard(plan, fs, shard, device))


def dispatch_order(shards: Sequence[Shard], planned: Mapping[Shard, float] | None = None) -> list[Shard]:
    """The order local workers take ``shards`` in: longest first, so that the last shards are short and the workers
    end together — by ``planned`` seconds where it gives every shard one (at 10 000 x 128 a 64-model MLP shard took
    17.6 s, as long as a 1 000-model DP-SGD one, while a 32-trial DP-SGD LiDP shard took 1.1 s), else by trials; the
    sort is stable, so shards of one length keep their plan order. The numbers do not depend on it (a shard's depend
    only on its trial range).

    >>> a, b, c = Shard("m", "blackbox", 0, 64), Shard("d", "lidp", 0, 32), Shard("d", "blackbox", 0, 1000)
    >>> [s.stop for s in dispatch_order([a, b, c])], [s.stop for s in dispatch_order([a, b, c], {a: 9.1, b: 1.8, c: 18.7})]
    ([1000, 64, 32], [1000, 64, 32])
    >>> [s.defender for s in dispatch_order([b, a], {a: 1.0, b: 2.0})], dispatch_order([a], {})[0] == a
    (['d', 'm'], True)
    """
    if planned is not None and all(s in planned for s in shards):
        return sorted(shards, key=lambda s: -planned[s])
    return sorted(shards, key=lambda s: -(s.stop - s.start))


def start_lanes(plan: CanaryPlan, todo: Sequence[Shard], device: str,
                planned: Mapping[Shard, float] | None = None) -> list[tuple[int, list[Shard]]] | None:
    """How :func:`run_missing_shards` runs ``todo``, as pools of ``(processes, shards in the order they start)``: one
    after the other in their order; or the local workers in :func:`dispatch_order`; on CUDA beside them the batched
    kinds' shards one after the other in this process, in their order (two pools). ``None`` on a Dask cluster (its
    size and order are not known here). For the progress line's ETA (:class:`privaudit.progress.FitProgress`'s
    ``lanes``); the processes add up to :func:`shards_at_once`."""
    if plan.compute.scheduler != "local":
        return None
    here, away, n_jobs = _local_split(plan, todo, device)
    if n_jobs <= 1:
        return [(1, list(todo))]
    return ([(1, here)] if here else []) + [(n_jobs, dispatch_order(away, planned))]


def run_missing_shards(root: Path, plan: CanaryPlan, fs: FeatureSet, todo: Sequence[Shard], device: str,
                       progress: Callable[[Shard, float], None] = lambda shard, seconds: None,
                       planned: Mapping[Shard, float] | None = None) -> None:
    """Run the shards ``todo`` and save each as it finishes; ``progress`` gets each finished shard and the
    seconds it took in the process that ran it; ``planned``: each shard's planned seconds (the workers take the
    longest first, :func:`dispatch_order`).

    Locally (``compute.scheduler: local``) one after the other, or on ``compute.n_jobs`` local worker
    processes (``auto``: one per core this process may use; each worker sets the
    device's deterministic kernels and one torch thread, and the fits inside a shard then run one after
    the other; forked from this process where :func:`privaudit.repro.worker_pool.fork_refusal` allows, else
    joblib's loky). On a CUDA device only the shards of sequential kinds (scikit-learn, ``kind: python``) go
    to the workers; the batched kinds' shards train on the GPU in this process meanwhile (one CUDA
    context, no processes queueing for the GPU). Otherwise on the Dask cluster at ``compute.scheduler``
    (features scattered once). Shards are saved here in the order they finish: a shard's numbers depend
    only on its trial range (module docstring), so the assembled outputs are the same bits whatever the
    parallelism, and a killed stage keeps every shard that finished.
    """
    if plan.compute.scheduler == "local":
        def run_here(shard: Shard) -> None:
            arrays, seconds = _timed_shard(plan, fs, shard, device)
            save_shard(root, plan, shard, arrays)
            progress(shard, seconds)

        here, away, n_jobs = _local_split(plan, todo, device)
        if n_jobs <= 1:
            for shard in todo:
                run_here(shard)
            return
        from privaudit.repro.worker_pool import map_in_processes

        order = dispatch_order(away, planned)  # longest first, to balance the workers
        inner = dataclasses.replace(plan, fits_in_shard_workers=True)
        runs = map_in_processes(_run_shard_in_process, [(s, device) for s in order], n_jobs, shared=(inner, fs),
                                ordered=False, device=_pool_device(plan, away, device))
        if not here:
            for shard, arrays, seconds in runs:
                save_shard(root, plan, shard, arrays)
                progress(shard, seconds)
            return
        _overlap(runs, here, run_here, lambda shard, arrays, seconds: (save_shard(root, plan, shard, arrays),
                                                                        progress(shard, seconds)))
        return
    from distributed import Client, as_completed

    with Client(plan.compute.scheduler) as client:
        fs_f = client.scatter(fs, broadcast=True)
        futures = {client.submit(_run_shard_on_worker, plan, fs_f, s, device, pure=False): s for s in todo}
        for fut in as_completed(futures):
            shard = futures[fut]
            arrays, seconds = fut.result()
            save_shard(root, plan, shard, arrays)
            progress(shard, seconds)


def shards_at_once(plan: CanaryPlan, todo: Sequence[Shard], device: str) -> int | None:
    """How many of ``todo`` :func:`run_missing_shards` runs side by side locally: the worker processes, plus this
    process where it trains batched kinds' shards beside them (CUDA); 1 when they run one after the other; ``None``
    on a Dask cluster (its size is not known here). For the progress line's ETA
    (:class:`privaudit.progress.FitProgress`)."""
    if plan.compute.scheduler != "local":
        return None
    here, _away, n_jobs = _local_split(plan, todo, device)
    return 1 if n_jobs <= 1 else n_jobs + (1 if here else 0)


def _local_split(plan: CanaryPlan, todo: Sequence[Shard], device: str) -> tuple[list[Shard], list[Shard], int]:
    """The shards trained in this process (batched kinds on CUDA), those for the workers, and the worker count."""
    here = [s for s in todo if _trains_here(plan, s, device)]
    away = [s for s in todo if s not in here]
    return here, away, min(plan.compute.workers(), len(away))


def _pool_device(plan: CanaryPlan, away: Sequence[Shard], device: str) -> str:
    """Where the workers' fits may run, for :func:`privaudit.repro.worker_pool.fork_refusal`: ``device``, unless every
    shard of theirs is a scikit-learn kind's (:data:`privaudit.defenders.specs.HOST_ONLY_KINDS`), which never touches
    it: such workers are forked even once this process has initialised the CUDA driver."""
    kinds = {spec.name: spec.kind for spec in plan.defenders}
    return device if any(kinds.get(s.defender) not in HOST_ONLY_KINDS for s in away) else "cpu"


def _trains_here(plan: CanaryPlan, shard: Shard, device: str) -> bool:
    """A batched kind's shard on a CUDA device: trained in the stage's own process, beside the workers."""
    kinds = {spec.name: spec.kind for spec in plan.defenders}
    return device.startswith("cuda") and kinds.get(shard.defender) in BATCHED_KINDS


def _overlap(runs: Iterator[tuple[Shard, dict[str, np.ndarray], float]], here: Sequence[Shard],
             run_here: Callable[[Shard], None], finish: Callable[[Shard, dict[str, np.ndarray], float], object]) -> None:
    """Run the ``here`` shards in this thread while a helper thread drives the worker processes' ``runs``;
    their results are saved and reported (``finish``) from this thread, between and after the local shards."""
    results: queue.Queue[tuple[Shard, dict[str, np.ndarray], float] | BaseException | None] = queue.Queue()

    def drive() -> None:
        try:
            for item in runs:
                results.put(item)
        except BaseException as exc:  # re-raised in this thread
            results.put(exc)
        results.put(None)

    def drain(block: bool) -> bool:
        """Finish the results that arrived; ``True`` once the workers are done."""
        while True:
            try:
                item = results.get(block=block)
            except queue.Empty:
                return False
            if item is None:
                return True
            if isinstance(item, BaseException):
                raise item
            finish(*item)

    thread = threading.Thread(target=drive, name="canary-shard-workers", daemon=True)
    thread.start()
    workers_done = False
    for shard in here:
        run_here(shard)
        workers_done = workers_done or drain(block=False)
    while not workers_done:
        workers_done = drain(block=True)
    thread.join()


def save_shard(root: Path, plan: CanaryPlan, shard: Shard, arrays: dict[str, np.ndarray]) -> Path:
    """Atomically write one finished shard (temporary file + rename); returns its path."""
    path = shard_path(root, plan, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def load_shard(root: Path, plan: CanaryPlan, shard: Shard) -> dict[str, np.ndarray]:
    """Arrays of a finished shard (raises FileNotFoundError / ValueError naming the file)."""
    path = shard_path(root, plan, shard)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise FileNotFoundError(f"shard {path} not found") from None
    except (ValueError, OSError, KeyError) as err:
        raise ValueError(f"shard {path} is corrupt: {err}") from None


def _shard_ok(root: Path, plan: CanaryPlan, shard: Shard, fingerprint: str | None) -> bool:
    path = shard_path(root, plan, shard)
    if not path.is_file():
        return False
    if fingerprint is None:
        return True
    try:
        with np.load(path, allow_pickle=False) as z:
            return str(z["inputs_fingerprint"]) == fingerprint
    except (ValueError, OSError, KeyError):
        return False


def missing_shards(root: Path, plan: CanaryPlan, fs: FeatureSet | None = None) -> list[Shard]:
    """The shards of :func:`plan_shards` without a finished file under :func:`shard_dir`.

    With ``fs``, a shard computed on other inputs (features/split) counts as missing too.
    """
    fp = inputs_fingerprint(fs) if fs is not None else None
    return [s for s in plan_shards(plan) if not _shard_ok(root, plan, s, fp)]


def prune_shards(root: Path, plan: CanaryPlan) -> list[Path]:
    """Delete the stored shards that ``plan`` cannot use; returns the removed directories.

    Keeps ``shard_dir(root, plan)/<defender>-<spec hash>`` of the defenders in ``plan`` and
    removes every other key directory under ``root`` and every other defender directory under
    the current key. Only directories that look like shard stores (hex key names) are touched.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    current = shard_dir(root, plan)
    keep = {shard_path(root, plan, s).parent.name for s in plan_shards(plan)}
    removed: list[Path] = []
    for key in sorted(root.iterdir()):
        if not key.is_dir() or not _is_hex(key.name):
            continue
        if key != current:
            shutil.rmtree(key)
            removed.append(key)
            continue
        for sub in sorted(key.iterdir()):
            if sub.is_dir() and sub.name not in keep:
                shutil.rmtree(sub)
                removed.append(sub)
    return removed


def _is_hex(name: str) -> bool:
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)
