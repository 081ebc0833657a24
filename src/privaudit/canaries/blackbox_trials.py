"""The models of the many-run black-box audit (:mod:`privaudit.audits.blackbox`), in shards.

Trial t of defender d trains the defender's recipe on the Defender set, **with** the crafted canary
(:func:`privaudit.canaries.crafted.craft_canary`, the same for every trial: it depends only on the
Defender set, the class count, the clip norm and ``blackbox.canary_scale``) when t is even and
**without** it when t is odd (add/remove neighbourhood), and keeps one number: the canary's score on
the final model, queried black-box through ``predict_proba`` at two points
(:func:`privaudit.canaries.crafted.canary_scores`).

* Batched trainer (``kind: dp_sgd`` / ``torch_mlp``, :func:`privaudit.defenders.recipes.recipe_from_spec`): the
  ``blackbox.block`` models of block b train together (:func:`privaudit.train.train_heads`), the
  canary as one extra row valid only in the even trials, from
  ``int_seed(base.seed, "canaries", "blackbox", d, "block", b)``.
* Any other kind (sklearn, ``kind: python``): one ``make_defender(spec).fit`` per trial, the canary
  appended as the last row, seed ``int_seed(base.seed, "canaries", "blackbox", d, "fit", t)``
  (joblib workers when ``compute.n_jobs`` > 1; Dask through the shards).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.canaries.crafted import CraftedCanary, canary_scores, clipped_scale, craft_canary, score_model
from privaudit.canaries.parallel import parallel_fits
from privaudit.canaries.plan import CanaryPlan
from privaudit.defenders.specs import BATCHED_KINDS, DefenderSpecBase, DpSgdSpec
from privaudit.features.feature_set import FeatureSet
from privaudit.seeding import int_seed

__all__ = ["SEQUENTIAL_SCALE_FACTOR", "batched_canary_scores", "blackbox_canary", "blackbox_trials", "clip_norm_of"]

#: ``canary_scale: auto`` for a trainer privaudit does not run itself (no batched recipe): the clip-aware scale
#: times this factor. Privaudit cannot see whether such a trainer clips: if it does, the canary's per-step
#: effect is capped at C whatever its scale (only saturation of its softmax costs a little tightness); if it
#: does not, the effect grows with the scale, and a scale of 3 leaves "no clipping" at claim 1 uncaught
#: (0/5 at 320 runs per side) while 30 catches it (benchmarks/results/blackbox_catalogue_pipeline_eps1.txt).
SEQUENTIAL_SCALE_FACTOR = 10.0


def clip_norm_of(spec: DefenderSpecBase) -> float:
    """The recipe's clip norm C (``dp_sgd``: ``max_grad_norm``; others: 1, used only to size the canary)."""
    return float(spec.max_grad_norm) if isinstance(spec, DpSgdSpec) else 1.0


def blackbox_canary(plan: CanaryPlan, fs: FeatureSet, name: str) -> CraftedCanary:
    """The crafted canary of defender ``name`` (deterministic: same inputs and params, same canary).

    ``blackbox.canary_scale: auto``: the clip-aware scale (:func:`~privaudit.canaries.crafted.clipped_scale`)
    for a batched recipe, :data:`SEQUENTIAL_SCALE_FACTOR` times it for any other trainer."""
    if plan.blackbox is None:
        raise ValueError("the plan has no blackbox settings (CanaryPlan.blackbox is None)")
    Xd, yd = fs.defender
    spec = plan.defender(name)
    scale = plan.blackbox.canary_scale
    clip = clip_norm_of(spec)
    if scale == "auto":
        s = clipped_scale(fs.n_classes, clip)
        if spec.kind not in BATCHED_KINDS:
            s *= SEQUENTIAL_SCALE_FACTOR
    else:
        s = float(scale)
    return craft_canary(Xd, yd, fs.n_classes, scale=s, clip_norm=clip)


def _sequential_score(spec: DefenderSpecBase, fs: FeatureSet, canary: CraftedCanary, include: bool, seed: int,
                      device: str) -> float:
    from privaudit.defenders.registry import make_defender

    Xd, yd = fs.defender
    X = np.vstack([Xd, canary.x[None, :].astype(Xd.dtype)]) if include else Xd
    y = np.concatenate([yd, np.array([canary.label], dtype=yd.dtype)]) if include else yd
    model = make_defender(spec, n_classes=fs.n_classes, device=device)
    model.fit(X, y, seed=seed)
    return score_model(model, canary)  # a non-finite score is kept: the audit says NOT AUDITED, naming it


def batched_canary_scores(recipe: Any, X: Any, y: Any, n_classes: int, canary: CraftedCanary, included: Any,
                          gen: Any) -> np.ndarray:
    """Scores of ``len(included)`` heads of ``recipe`` trained together on (X, y) (torch tensors on one
    device) by :func:`privaudit.train.train_heads` from ``gen``; head i also trains on the canary iff
    ``included[i]`` (a bool tensor). One batched call, no per-model loop."""
    import torch

    from privaudit.train import TrainData, predict_proba, train_heads

    M, dev = int(included.numel()), X.device
    data = TrainData(X, y, M, X_extra=torch.as_tensor(canary.x, device=dev).expand(M, 1, -1).contiguous(),
                     y_extra=torch.full((M, 1), canary.label, dtype=torch.int64, device=dev),
                     extra_valid=included.reshape(M, 1))
    heads = train_heads(recipe, data, n_classes, gen)
    p = predict_proba(heads, torch.as_tensor(canary.queries, device=dev)).detach().cpu().numpy()
    return canary_scores(p[:, 0], p[:, 1], canary)


def blackbox_trials(plan: CanaryPlan, fs: FeatureSet, name: str, start: int, stop: int,
                    device: str) -> dict[str, np.ndarray]:
    """``score`` (t,) and ``included`` (t,) of black-box trials ``[start, stop)`` of defender ``name``."""
    total, block = plan.trials("blackbox", name), plan.blackbox_block(name)
    if not (0 <= start < stop <= total) or start % block:
        raise ValueError(f"black-box trial range [{start}, {stop}) must lie in [0, {total}) and start on a block "
                         f"boundary ({block} trials)")
    spec, seed = plan.defender(name), plan.seed
    canary = blackbox_canary(plan, fs, name)
    trials = np.arange(start, stop)
    included = (trials % 2 == 0)
    from privaudit.defenders.recipes import recipe_from_spec

    recipe = recipe_from_spec(spec, int(fs.is_defender.sum()), fs.n_classes)
    if recipe is None:
        scores = np.array(parallel_fits(plan, [
            (_sequential_score, (spec, fs, canary, bool(inc), int_seed(seed, "canaries", "blackbox", name, "fit", int(t)),
                                 device)) for t, inc in zip(trials, included)]), dtype=np.float64)
        return {"score": scores, "included": included.astype(np.int8)}
    import torch

    Xd, yd = fs.defender
    Xb = torch.as_tensor(np.ascontiguousarray(Xd, dtype=np.float32), device=device)
    yb = torch.as_tensor(np.asarray(yd, dtype=np.int64), device=device)
    parts: list[np.ndarray] = []
    for b0 in range(start, stop, block):
        inc = torch.as_tensor(included[b0 - start:min(b0 + block, stop) - start], device=device)
        gen = torch.Generator(device=device).manual_seed(int_seed(seed, "canaries", "blackbox", name, "block",
                                                                  b0 // block))
        parts.append(batched_canary_scores(recipe, Xb, yb, fs.n_classes, canary, inc, gen))
    scores: Any = np.concatenate(parts)  # non-finite scores are kept (canaries.assembly: NOT AUDITED)
    return {"score": scores.astype(np.float64), "included": included.astype(np.int8)}
