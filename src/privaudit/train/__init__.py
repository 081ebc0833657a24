"""privaudit.train — the batched trainer: many small heads trained at once (GPU or CPU).

:func:`train_heads` trains M linear/MLP heads in one batched computation (SGD or DP-SGD with
per-example clipping, Poisson sampling and Gaussian noise per model). It knows no defender: the zoo maps
its ``kind: torch_mlp`` / ``kind: dp_sgd`` specs to a :class:`HeadRecipe`
(:func:`privaudit.defenders.recipes.recipe_from_spec`).
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

__all__ = [
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
    "train_heads",
]
