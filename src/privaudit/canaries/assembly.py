"""Assemble finished trial shards into the canaries stage's outputs, ``data/canaries/<defender>/``.

Per audited defender: ``game3.npz`` (one row per canary over all runs), ``lidp.npz`` (``loss_in``
(n, K) / ``loss_null`` (n, m), or ``stat_in``/``stat_null`` for gradient canaries, whose inner
products may be negative), ``blackbox.npz`` (``score`` and ``included`` per black-box run) and
``meta.json`` (what was run). Every array set passes the GX
``canaries`` suite before it is written; a shard computed on other inputs is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from privaudit.artifacts import write_json
from privaudit.canaries.shards import Shard, load_shard
from privaudit.canaries.plan import CanaryPlan
from privaudit.features.feature_set import FeatureSet
from privaudit.validation import validate_canary_stats

__all__ = ["assemble_blackbox", "assemble_experiment", "blackbox_meta", "canary_meta", "canary_statistic", "summary_line", "write_defender_outputs"]


def canary_statistic(canary_type: str, gradient_reference: int) -> str:
    """What the LiDP statistic of ``lidp.canary_type`` is (recorded in ``meta.json``)."""
    if canary_type != "random_gradient":
        return "cross-entropy loss"
    if gradient_reference:
        return (f"inner product <c, theta_T - theta_0 - mean displacement of {gradient_reference} "
                "canary-free heads>")
    return "inner product <c, theta_T - theta_0>"


def canary_meta(plan: CanaryPlan, n_classes: int, n_game3: int, fingerprint: str) -> dict[str, Any]:
    """``meta.json`` of every audited defender: the Game-3 and LiDP designs that ran, and the inputs' fingerprint."""
    g, lp = plan.game3, plan.lidp
    return {"game3": {"canaries": n_game3, "canaries_setting": g.canaries, "runs": g.runs, "n_classes": n_classes,
                      "game": "label_flip" if n_classes == 2 else "two_wrong_labels"},
            "lidp": {"trials": lp.trials, "canaries": lp.k_canaries(), "null_canaries": lp.m_null(),
                     "canary_type": lp.canary_type, "neighbourhood": lp.neighbourhood,
                     "statistic": canary_statistic(lp.canary_type, lp.gradient_reference)},
            "inputs_fingerprint": fingerprint}


def summary_line(plan: CanaryPlan, name: str, n_classes: int, n_game3: int) -> str:
    """The stage's one line per defender: the Game-3 and LiDP designs that ran."""
    lp = plan.lidp
    bb = plan.blackbox_runs(name)
    return (f"canaries: {name}: Game 3 with {plan.game3.runs} x {n_game3} canaries"
            f"{' (label flip, C = 2)' if n_classes == 2 else ''}; {lp.trials} LiDP trials ({lp.neighbourhood}, "
            f"{lp.canary_type}) with K={lp.k_canaries()}, m={lp.m_null()}"
            + (f"; {bb} + {bb} black-box runs (with / without the crafted canary)" if bb else ""))


def assemble_experiment(shards: list[dict[str, np.ndarray]], experiment: str, *, canary_type: str,
                        game3_runs: int) -> dict[str, np.ndarray]:
    """One experiment's arrays from its shards (in trial order), validated by the GX ``canaries`` suite.

    Game 3: runs × canaries flattened to one row per canary, with ``defender_row`` and ``run``
    (``canary_index`` when there is one run). LiDP: trials stacked; gradient canaries' statistics
    renamed ``stat_in``/``stat_null`` (signed, checked as statistics, not losses).
    """
    if experiment == "game3":
        arrays = {k: np.concatenate([a[k].reshape(-1, *a[k].shape[2:]) for a in shards])
                  for k in ("true_label", "label_pair", "bit", "proba")}
        rows = np.concatenate([a["canary_index"] for a in shards])
        arrays["defender_row"] = rows.reshape(-1)
        arrays["run"] = np.repeat(np.arange(rows.shape[0]), rows.shape[1])
        if game3_runs == 1:
            arrays["canary_index"] = arrays.pop("defender_row")
        validate_canary_stats("game3", arrays)
        return arrays
    arrays = {k: np.concatenate([a[k] for a in shards]) for k in ("loss_in", "loss_null")}
    if canary_type == "random_gradient":
        arrays = {"stat_in": arrays["loss_in"], "stat_null": arrays["loss_null"]}
    validate_canary_stats("lidp", arrays)
    return arrays


def assemble_blackbox(shards: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The black-box runs' ``score`` (n,) and ``included`` (n,) 0/1 from their shards (trial order),
    validated by the GX ``canaries`` suite."""
    arrays = {k: np.concatenate([a[k] for a in shards]) for k in ("score", "included")}
    validate_canary_stats("blackbox", arrays)
    return arrays


def blackbox_meta(plan: CanaryPlan, fs: FeatureSet, name: str) -> dict[str, Any]:
    """``meta.json``'s ``blackbox`` entry of defender ``name``: the canary and the runs per side."""
    from privaudit.canaries.blackbox_trials import blackbox_canary

    canary = blackbox_canary(plan, fs, name)
    return {"runs_per_side": plan.blackbox_runs(name), "canary": canary.describe(), "canary_scale": canary.scale,
            "canary_label": canary.label, "canary_data_energy": canary.data_energy,
            "n_train": int(fs.is_defender.sum())}


def _unusable(shards: list[dict[str, np.ndarray]], experiment: str, name: str) -> str | None:
    """Why the statistics of ``shards`` cannot be audited (:func:`privaudit.canaries.stats_files.unusable_reason`)."""
    from privaudit.canaries.stats_files import unusable_reason

    keys = {k for a in shards for k in a if k != "inputs_fingerprint"}
    return unusable_reason({k: np.concatenate([np.asarray(a[k]).ravel() for a in shards if k in a]) for k in keys},
                           experiment, name) if shards else None


def write_defender_outputs(out: Path, shard_root: Path, plan: CanaryPlan, shards_planned: list[Shard], name: str,
                           meta: dict[str, Any], fingerprint: str, fs: FeatureSet | None = None) -> None:
    """``out/<name>/{game3,lidp,blackbox}.npz`` from the finished shards of ``shards_planned``, and
    ``meta.json`` (``fs``: the features, to describe the black-box canary; needed when black-box runs
    are planned)."""
    (out / name).mkdir()
    meta = dict(meta)
    for exp in ("game3", "lidp", "blackbox"):
        shards = [load_shard(shard_root, plan, s) for s in shards_planned if s.defender == name and s.experiment == exp]
        if any(str(a["inputs_fingerprint"]) != fingerprint for a in shards):
            raise ValueError(f"a shard of {name}/{exp} under {shard_root} was computed on other inputs")
        reason = _unusable(shards, exp, name)
        if reason is not None:  # the audits of this experiment record the defender as NOT AUDITED, naming why
            meta.setdefault("unusable", {})[exp] = reason
            print(f"canaries: WARNING: {reason}; the {exp} audit of {name!r} will be NOT AUDITED")
            continue
        if exp == "blackbox":
            if not shards:
                continue
            if fs is None:
                raise ValueError("write_defender_outputs needs fs (the features) to describe the black-box canary")
            arrays = assemble_blackbox(shards)
            meta["blackbox"] = blackbox_meta(plan, fs, name)
        else:
            arrays = assemble_experiment(shards, exp, canary_type=plan.lidp.canary_type, game3_runs=plan.game3.runs)
        np.savez(out / name / f"{exp}.npz", **arrays)
    write_json(out / name / "meta.json", meta)
