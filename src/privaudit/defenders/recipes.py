"""Map a defender spec to the batched trainer's :class:`HeadRecipe` (or None: train sequentially).

``kind: torch_mlp`` → minibatch SGD with momentum and weight decay
(:class:`privaudit.defenders.torch_head.TorchMLPDefender`); ``kind: dp_sgd`` → DP-SGD with q and
steps from the spec (:meth:`~privaudit.defenders.specs.DpSgdSpec.sample_rate`,
:meth:`~privaudit.defenders.specs.DpSgdSpec.steps`) and σ from
:func:`privaudit.defenders.dp_sgd.dp_sgd_mechanism` (opacus's accountant and ``get_noise_multiplier``),
the functions :class:`~privaudit.defenders.dp_sgd.DpSgdDefender` trains with; nothing is re-derived
here. Any other kind returns None and the canary experiments fall back to fitting ``make_defender``
models one by one.

σ, q and the steps are calibrated for the defender's **own** training-set size ``n_train`` (the
Defender set); canary experiments add a few rows (K canaries), and keep that calibration — the
audited recipe is "the defender's DP-SGD run", whose guarantee (per example, add/remove) does
not depend on the few extra rows. The expected batch size stays ``batch_size`` as in opacus.
"""

from __future__ import annotations

from privaudit.defenders.dp_sgd import dp_sgd_mechanism
from privaudit.defenders.specs import BATCHED_KINDS, DefenderSpecBase, DpSgdSpec, TorchMLPSpec
from privaudit.train.batched import DPSettings, HeadRecipe


def recipe_from_spec(spec: DefenderSpecBase, n_train: int, n_classes: int = 2) -> HeadRecipe | None:
    """The batched-trainer recipe of a validated defender spec, or None for other kinds.

    Args:
        spec: a validated ``defenders[i]`` spec.
        n_train: the defender's own training-set size (σ, q, steps are calibrated for it).
        n_classes: unused (the recipe does not depend on it); kept for callers.
    """
    if spec.kind not in BATCHED_KINDS or not isinstance(spec, (TorchMLPSpec, DpSgdSpec)):
        return None
    if n_train < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train}")
    shared = int(spec.random_state) if spec.randomness in ("fixed", "shuffled") else None
    if isinstance(spec, TorchMLPSpec):
        return HeadRecipe(
            hidden=tuple(spec.hidden), epochs=int(spec.epochs), batch_size=int(spec.batch_size), lr=float(spec.lr),
            momentum=float(spec.momentum), weight_decay=float(spec.weight_decay),
            shuffle=spec.randomness != "fixed", shared_init_seed=shared,
        )
    mech = dp_sgd_mechanism(spec, n_train)
    dp = DPSettings(
        noise_multiplier=float(mech.noise_multiplier),
        max_grad_norm=float(spec.max_grad_norm),
        sample_rate=float(mech.sample_rate),
        steps=int(mech.steps),
        expected_batch_size=float(spec.batch_size),
    )
    return HeadRecipe(hidden=tuple(spec.hidden), epochs=int(spec.epochs), batch_size=int(spec.batch_size),
                      lr=float(spec.lr), shared_init_seed=shared, dp=dp)
