"""Stage defenders: train every ``defenders[i]`` → ``data/defenders/<name>/`` (model, outputs, info; for an
observable defender also the release run's white-box observations, ``privaudit.defenders.release_watch``).

Each release fit is timed, then what a call of the trainer costs after it (``privaudit.planning.fit_probe``:
the median of three fits, or of three batched calls of 2 and of 8 models); the times go to
``data/.timings/fits.json`` (outside DVC, read by the plan stage: ``privaudit.planning.timings``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.config import Params
from privaudit.features.feature_set import read_feature_files
from privaudit.repro.determinism import configure_determinism
from privaudit.features import resolve_device
from privaudit.planning.timings import (
    DEFAULT_TIMINGS,
    FitTime,
    fit_key,
    process_seconds,
    record_fit_time,
    record_heavy_startup,
)
from privaudit.repro.user_code import user_code_digests
from privaudit.defenders.info_file import check_defender_files
from privaudit.validation import validate_defender_outputs, validate_features, validate_membership
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/defenders"))
    p.add_argument("--timings", type=Path, default=DEFAULT_TIMINGS, help="where the release fits' times are kept")


def _body(args: argparse.Namespace, params: Params) -> None:
    """Train each defender recipe on the Defender set and record per-sample outputs."""
    ensure_writable(args.out)
    device = resolve_device(params.base.device)
    configure_determinism(device)
    check_inputs(args.features, args.split, params)
    # the trainers (torch, sklearn, opacus) load only once the inputs have passed their checks
    from privaudit.defenders.trained_files import train_release, write_defender
    from privaudit.features.feature_set import load_feature_set
    from privaudit.planning.fit_probe import measure_fit_rate, probe_block

    fs = load_feature_set(args.features, args.split)
    from stages import _runner

    startup = process_seconds() if _runner.STARTUP_SECONDS is not None else None  # a real stage process only
    if startup is not None:  # a heavy stage's start-up to its first fit: the plan's prior for the audit stages
        record_heavy_startup("defenders", startup, args.timings.parent)
    # a user's trainer (kind: python) trains first: a broken one fails before the built-in defenders are retrained
    ordered = sorted(params.defenders, key=lambda s: s.kind != "python")
    digests = user_code_digests([s.model_dump(mode="json") for s in ordered], Path.cwd())
    times = []
    with atomic_dir(args.out) as tmp:
        for spec in ordered:
            # observable defenders train under privaudit.hooks.recording (same bits; the white-box audit pools it)
            t = train_release(spec, fs, params.base.seed, device, canary_scale=params.whitebox.canary_scale)
            # timed only (own seeds, results dropped): what the plan estimates every later fit from
            # a batched trainer's slope is timed on a call as large as the canaries' largest (its black-box blocks)
            block = probe_block(params.blackbox.block, params.blackbox.runs_per_side(
                batched=True, claims_epsilon=spec.claims_epsilon(), observable=spec.observable_training()))
            # and again on as many workers at once as the audits' pools run (compute.n_jobs): their contention
            probe = measure_fit_rate(spec, *fs.defender, fs.n_classes, device, params.base.seed, block=block,
                                     workers=params.compute.workers())
            times.append(FitTime(spec.name, fit_key(spec.model_dump(mode="json"), digests.get(spec.name),
                                                    int(t.info["n_defender"])), t.fit_seconds, int(t.info["n_defender"]),
                                 model_seconds=probe.model_seconds, call_seconds=probe.call_seconds,
                                 timed_by=probe.timed_by, device=device, slowdown=probe.slowdown,
                                 slowdown_workers=probe.workers, slowdown_by=probe.slowdown_by,
                                 observing_seconds=t.watch.observing_seconds if t.watch is not None else 0.0))
            validate_defender_outputs(t.outputs, fs.n_classes, fs.ids)  # output, before it is moved into place
            write_defender(tmp / spec.name, t.model, t.outputs, t.info, t.watch)
            info = t.info
            print(f"defenders: {spec.name} ({spec.kind}): train acc {info['train_accuracy']:.3f}, "
                  f"test acc {info['test_accuracy']:.3f}, utility {info['utility']:.3f}, "
                  f"claimed eps {info['claimed_epsilon']}" + (f"; {t.watch.summary()}" if t.watch else ""))
            correction = t.model.claim_correction()
            if correction is not None:  # a recipe's accountant below its own mechanism (privaudit.defenders.dp_sgd)
                print(f"defenders: WARNING: {correction}")
        check_defender_files(tmp, [spec.name for spec in params.defenders])  # before the move into place
    for fit in times:  # measured, not a result: beside the DVC outputs (privaudit.planning.timings)
        record_fit_time(fit, args.timings)


def check_inputs(features: Path, split: Path, params: Params) -> None:
    """GX suites 'split' (membership table) and 'features' (finite, meta.json's dim) before any training."""
    X, ids, meta, membership = read_feature_files(features, split)
    validate_membership(membership, int(meta["n_classes"]), params.split.defender_fraction,
                        params.split.fraction_tolerance)
    validate_features(X, ids, ids, meta.get("dim"))


if __name__ == "__main__":
    sys.exit(run_stage("defenders", _args, _body, torch_threads=1))
