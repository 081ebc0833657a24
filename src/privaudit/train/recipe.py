"""Map a defender spec to the batched trainer's :class:`HeadRecipe` (or None: train sequentially).

``kind: torch_mlp`` → minibatch SGD with momentum and weight decay
(:class:`privaudit.defenders.torch_head.TorchMLPDefender`); ``kind: dp_sgd`` → DP-SGD with σ, q
and steps from :class:`privaudit.defenders.dp_sgd.DpSgdDefender` (opacus's accountant and
``get_noise_multiplier``; nothing is re-derived here). Any other kind returns None and the
canary experiments fall back to fitting ``make_defender`` models one by one.

σ, q and the steps are calibrated for the defender's **own** training-set size ``n_train`` (the
Defender set); canary experiments add a few rows (K canaries), and keep that calibration — the
audited recipe is "the defender's DP-SGD run", whose guarantee (per example, add/remove) does
not depend on the few extra rows. The expected batch size stays ``batch_size`` as in opacus.
"""

from __future__ import annotations

from typing import Any

from privaudit.defenders.registry import make_defender
from privaudit.train.batched import DPSettings, HeadRecipe

BATCHED_KINDS = ("torch_mlp", "dp_sgd")


def recipe_from_spec(spec: dict[str, Any], n_train: int, n_classes: int = 2) -> HeadRecipe | None:
    """The batched-trainer recipe of a validated defender spec, or None for other kinds.

    Args:
        spec: a validated ``defenders[i]`` mapping.
        n_train: the defender's own training-set size (σ, q, steps are calibrated for it).
        n_classes: only used to build the defender object that knows its recipe.
    """
    kind = spec.get("kind")
    if kind not in BATCHED_KINDS:
        return None
    if n_train < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train}")
    model = make_defender(spec, n_classes=max(2, n_classes), device="cpu")
    s = model.spec
    shared = int(s.random_state) if s.randomness in ("fixed", "shuffled") else None
    if kind == "torch_mlp":
        return HeadRecipe(
            hidden=tuple(s.hidden), epochs=int(s.epochs), batch_size=int(s.batch_size), lr=float(s.lr),
            momentum=float(s.momentum), weight_decay=float(s.weight_decay),
            shuffle=s.randomness != "fixed", shared_init_seed=shared,
        )
    dp = DPSettings(
        noise_multiplier=float(model.noise_multiplier(n_train)),  # type: ignore[attr-defined]
        max_grad_norm=float(s.max_grad_norm),
        sample_rate=float(model.sample_rate(n_train)),  # type: ignore[attr-defined]
        steps=int(model.steps(n_train)),  # type: ignore[attr-defined]
        expected_batch_size=float(s.batch_size),
    )
    return HeadRecipe(hidden=tuple(s.hidden), epochs=int(s.epochs), batch_size=int(s.batch_size),
                      lr=float(s.lr), shared_init_seed=shared, dp=dp)
