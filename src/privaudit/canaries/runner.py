"""Run trials [start, stop) of one experiment of one defender: batched when the defender has a
batched recipe (:func:`privaudit.defenders.recipes.recipe_from_spec`), else sequential ``make_defender`` fits.

Randomness: trial t's canaries come from ``rng_for(base.seed, "canaries", <experiment>, <defender>, t)``;
the training randomness of block b (``compute.block_trials`` trials) from
``int_seed(base.seed, "canaries", <experiment>, <defender>, "block", b)`` (batched) or from the
trial's own generator (sequential).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.canaries.batched_runs import (
    clipbkd_labels,
    game3_block,
    game3_draw,
    lidp_block,
    reference_displacement,
)
from privaudit.canaries.designs import (
    BATCHED_ONLY,
    CanaryDraw,
    draw_clipbkd,
    draw_mislabel,
    draw_random_gradient,
    tail_singular_vectors,
)
from privaudit.canaries.sequential_runs import game3_sequential, lidp_trial_sequential
from privaudit.canaries.sizes import check_canary_sizes, game3_canaries
from privaudit.canaries.parallel import parallel_fits
from privaudit.canaries.plan import CanaryPlan
from privaudit.features.feature_set import FeatureSet
from privaudit.seeding import int_seed, rng_for
from privaudit.train import HeadRecipe
from privaudit.defenders.recipes import recipe_from_spec
from privaudit.train.heads import layer_sizes


def defender_recipe(plan: CanaryPlan, fs: FeatureSet, name: str) -> HeadRecipe | None:
    """The batched recipe of defender ``name`` calibrated for the Defender-set size, or None."""
    return recipe_from_spec(plan.defender(name), int(fs.is_defender.sum()), fs.n_classes)


def check_canary_setup(plan: CanaryPlan, fs: FeatureSet) -> None:
    """Validate the canary experiments before any training (errors name the params key).

    The size checks (:func:`privaudit.canaries.sizes.check_canary_sizes`) already ran in the split
    stage; they are repeated here on the features actually loaded. Any C >= 2 works: with two
    classes Game 3 is the label-flip game (:func:`privaudit.canaries.batched_runs.game3_draw`).
    """
    n_def = int(fs.is_defender.sum())
    if fs.n_classes < 2:
        raise ValueError(f"the canary audits need >= 2 classes, data set has {fs.n_classes}")
    check_canary_sizes(plan, n_def, int((~fs.is_defender).sum()), int(fs.X.shape[1]))
    lp = plan.lidp
    for spec in plan.defenders:
        if lp.canary_type in BATCHED_ONLY and defender_recipe(plan, fs, spec.name) is None:
            raise ValueError(
                f"lidp.canary_type: {lp.canary_type} needs a batched torch head (kind torch_mlp or dp_sgd); "
                f"defender {spec.name!r} has kind {spec.kind!r} — use lidp.canary_type: mislabel or "
                "restrict canaries.defenders"
            )


def _lidp_draws(plan: CanaryPlan, fs: FeatureSet, name: str, recipe: HeadRecipe | None, trials: range,
                device: str) -> list[CanaryDraw]:
    lp, seed = plan.lidp, plan.seed
    count = lp.k_canaries() + lp.m_null()
    rngs = [rng_for(seed, "canaries", "lidp", name, t) for t in trials]
    if lp.canary_type == "mislabel":
        Xr, yr = fs.reserved
        return [draw_mislabel(Xr, yr, fs.n_classes, count, r) for r in rngs]
    if recipe is None:
        raise ValueError(f"lidp.canary_type: {lp.canary_type} needs a batched torch head (defender {name!r})")
    if lp.canary_type == "clipbkd":
        Xd = fs.defender[0]
        p = lp.clipbkd_pool or max(1, min(Xd.shape) // 4)
        vectors = tail_singular_vectors(Xd, p)
        labels = clipbkd_labels(recipe, fs, vectors, lp.clipbkd_alpha,
                                int_seed(seed, "canaries", "clipbkd", name), device)
        return [draw_clipbkd(vectors, labels, lp.clipbkd_alpha, count, r) for r in rngs]
    n_params = sum(i * o + o for i, o in layer_sizes(fs.X.shape[1], recipe.hidden, fs.n_classes))
    radius = lp.gradient_norm or (recipe.dp.max_grad_norm if recipe.dp is not None else 1.0)
    return [draw_random_gradient(n_params, radius, count, r) for r in rngs]


def run_trials(plan: CanaryPlan, fs: FeatureSet, name: str, experiment: str, start: int, stop: int,
               device: str) -> dict[str, np.ndarray]:
    """Raw statistics of trials ``[start, stop)`` (see :func:`privaudit.canaries.shards.run_shard`)."""
    if experiment == "blackbox":
        from privaudit.canaries.blackbox_trials import blackbox_trials

        return blackbox_trials(plan, fs, name, start, stop, device)
    block = int(plan.compute.block_trials)
    total = int(plan.game3.runs) if experiment == "game3" else int(plan.lidp.trials)
    if not (0 <= start < stop <= total) or start % block:
        raise ValueError(f"trial range [{start}, {stop}) of {experiment} must lie in [0, {total}) and start "
                         f"on a block boundary (compute.block_trials={block})")
    recipe = defender_recipe(plan, fs, name)
    spec, seed = plan.defender(name), plan.seed
    blocks = [range(b, min(b + block, stop)) for b in range(start, stop, block)]
    if experiment == "game3":
        n_canaries = game3_canaries(plan, int(fs.is_defender.sum()))
        draws = [game3_draw(fs, n_canaries, rng_for(seed, "canaries", "game3", name, r))
                 for r in range(start, stop)]
        if recipe is not None:
            proba = np.concatenate([
                game3_block(recipe, fs, draws[b.start - start:b.stop - start],
                            int_seed(seed, "canaries", "game3", name, "block", b.start // block), device)
                for b in blocks])
        else:
            proba = np.stack(parallel_fits(plan, [
                (game3_sequential, (spec, fs, d, int_seed(seed, "canaries", "game3", name, "fit", r), device))
                for r, d in zip(range(start, stop), draws)]))
        out: dict[str, Any] = {k: np.stack([d[k] for d in draws]) for k in draws[0]}
        out["proba"] = proba
        return out
    lp = plan.lidp
    k, m = lp.k_canaries(), lp.m_null()
    draws_all = _lidp_draws(plan, fs, name, recipe, range(start, stop), device)
    if recipe is not None:
        reference = None
        if lp.canary_type == "random_gradient" and lp.gradient_reference:
            # the same for every shard: seeded by the defender, not by the trial range
            reference = reference_displacement(recipe, fs, lp.gradient_reference,
                                               int_seed(seed, "canaries", "lidp", name, "reference"), device)
        parts = [lidp_block(recipe, fs, draws_all[b.start - start:b.stop - start], k, m, lp.neighbourhood,
                            int_seed(seed, "canaries", "lidp", name, "block", b.start // block), device,
                            reference)
                 for b in blocks]
        return {"loss_in": np.concatenate([p[0] for p in parts]), "loss_null": np.concatenate([p[1] for p in parts])}
    res = parallel_fits(plan, [
        (lidp_trial_sequential, (spec, fs, d, k, m, lp.neighbourhood,
                                 rng_for(seed, "canaries", "lidp", name, t, "fit"), device))
        for t, d in zip(range(start, stop), draws_all)])
    return {"loss_in": np.stack([r[0] for r in res]), "loss_null": np.stack([r[1] for r in res])}
