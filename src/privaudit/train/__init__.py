"""privaudit.train — the batched trainer: many small heads trained at once (GPU or CPU).

:func:`train_heads` trains M linear/MLP heads in one batched computation (SGD or DP-SGD with
per-example clipping, Poisson sampling and Gaussian noise per model); :func:`recipe_from_spec`
maps ``kind: torch_mlp`` / ``kind: dp_sgd`` defender specs to it.
"""

from privaudit.train.batched import DPSettings, HeadRecipe, TrainData, initial_heads, train_heads
from privaudit.train.heads import (
    StackedHeads,
    clip_factors,
    cross_entropy_per_model,
    forward,
    init_heads,
    per_example_gradients,
    predict_proba,
)
from privaudit.train.recipe import BATCHED_KINDS, recipe_from_spec

__all__ = [
    "BATCHED_KINDS",
    "DPSettings",
    "HeadRecipe",
    "StackedHeads",
    "TrainData",
    "clip_factors",
    "cross_entropy_per_model",
    "forward",
    "init_heads",
    "initial_heads",
    "per_example_gradients",
    "predict_proba",
    "recipe_from_spec",
    "train_heads",
]
