"""privaudit.stats — the statistics core (numpy/scipy only).

The names listed in docs/architecture.md ("The statistics API") are fixed; extras are exported too.
Papers: Pillutla et al. 2023 (LiDP / XBern intervals), Malek et al. 2021 (Game 3), Pedersen et
al. 2022 (LTU), Thudi et al. 2022 (MI bounds), Izzo et al. 2023 (MIP), Steinke, Nasr & Jagielski
2023 (one-run auditing).

Importing the package imports no submodule (nor scipy): each name is imported from its module on
first use, so a caller of one numpy-only function (``mi_bounds``) starts without scipy.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports (name -> module): most modules import scipy, which a stage that reads JSON never needs.
_EXPORTS: dict[str, str] = {
    "clopper_pearson": "privaudit.stats.binomial",
    "acgr_epsilon": "privaudit.stats.game3",
    "acgr_interval": "privaudit.stats.game3",
    "epsilon_from_accuracy": "privaudit.stats.game3",
    "game3_epsilon": "privaudit.stats.game3",
    "epsilon_from_bounds": "privaudit.stats.lidp",
    "lidp_epsilon_lower_bound": "privaudit.stats.lidp",
    "lidp_epsilon_lower_bound_replace_one": "privaudit.stats.lidp",
    "ltu_pairwise_accuracy": "privaudit.stats.ltu",
    "ltu_pairwise_probabilities": "privaudit.stats.ltu",
    "ltu_privacy": "privaudit.stats.ltu",
    "ltu_theorem1_bound": "privaudit.stats.ltu",
    "ltu_theorem2_bound": "privaudit.stats.ltu",
    "ltu_utility": "privaudit.stats.ltu",
    "deletion_capacity": "privaudit.stats.mi_bounds",
    "mi_accuracy_bound": "privaudit.stats.mi_bounds",
    "mi_accuracy_lower_bound": "privaudit.stats.mi_bounds",
    "mi_negative_accuracy_bounds": "privaudit.stats.mi_bounds",
    "mi_positive_advantage_bound": "privaudit.stats.mi_bounds",
    "subsampled_mi_accuracy_bound": "privaudit.stats.mi_bounds",
    "epsilon_for_mip_eta": "privaudit.stats.mip",
    "mip_eta": "privaudit.stats.mip",
    "mip_noise_scale": "privaudit.stats.mip",
    "mip_norm": "privaudit.stats.mip",
    "sample_mip_noise": "privaudit.stats.mip",
    "one_run_counts": "privaudit.stats.one_run",
    "one_run_epsilon_lower_bound": "privaudit.stats.one_run",
    "one_run_p_value": "privaudit.stats.one_run",
    "ThresholdCertificate": "privaudit.stats.thresholds",
    "ThresholdSelection": "privaudit.stats.thresholds",
    "bonferroni_max": "privaudit.stats.thresholds",
    "certify_bonferroni": "privaudit.stats.thresholds",
    "certify_selected": "privaudit.stats.thresholds",
    "certify_split": "privaudit.stats.thresholds",
    "select_threshold": "privaudit.stats.thresholds",
    "effective_order": "privaudit.stats.xbern",
    "xbern_interval": "privaudit.stats.xbern",
    "xbern_interval_from_counts": "privaudit.stats.xbern",
    "xbern_moments": "privaudit.stats.xbern",
}

__all__ = [
    # fixed API (docs/architecture.md, "The statistics API")
    "xbern_moments",
    "xbern_interval",
    "lidp_epsilon_lower_bound",
    "clopper_pearson",
    "epsilon_from_accuracy",
    "game3_epsilon",
    "acgr_epsilon",
    "ltu_privacy",
    "ltu_utility",
    "mi_accuracy_bound",
    "mi_accuracy_lower_bound",
    "deletion_capacity",
    "mip_eta",
    "epsilon_for_mip_eta",
    "mip_noise_scale",
    "one_run_epsilon_lower_bound",
    # extras
    "acgr_interval",
    "effective_order",
    "epsilon_from_bounds",
    "lidp_epsilon_lower_bound_replace_one",
    "ltu_pairwise_accuracy",
    "ltu_pairwise_probabilities",
    "ltu_theorem1_bound",
    "ltu_theorem2_bound",
    "mi_negative_accuracy_bounds",
    "mi_positive_advantage_bound",
    "subsampled_mi_accuracy_bound",
    "xbern_interval_from_counts",
    "mip_norm",
    "sample_mip_noise",
    "one_run_counts",
    "one_run_p_value",
    "ThresholdCertificate",
    "ThresholdSelection",
    "bonferroni_max",
    "certify_bonferroni",
    "certify_selected",
    "certify_split",
    "select_threshold",
]


def __getattr__(name: str) -> Any:
    """Import an exported name from its submodule on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'privaudit.stats' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """Exported names, for completion."""
    return sorted([*globals(), *_EXPORTS])
