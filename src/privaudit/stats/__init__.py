"""privaudit.stats — the statistics core (numpy/scipy only).

The names listed in docs/architecture.md ("The statistics API") are fixed; extras are exported too.
Papers: Pillutla et al. 2023 (LiDP / XBern intervals), Malek et al. 2021 (Game 3), Pedersen et
al. 2022 (LTU), Thudi et al. 2022 (MI bounds), Izzo et al. 2023 (MIP), Steinke, Nasr & Jagielski
2023 (one-run auditing).
"""

from .binomial import clopper_pearson
from .game3 import acgr_epsilon, acgr_interval, epsilon_from_accuracy, game3_epsilon
from .lidp import epsilon_from_bounds, lidp_epsilon_lower_bound, lidp_epsilon_lower_bound_replace_one
from .ltu import (
    ltu_pairwise_accuracy,
    ltu_pairwise_probabilities,
    ltu_privacy,
    ltu_theorem1_bound,
    ltu_theorem2_bound,
    ltu_utility,
)
from .mi_bounds import (
    deletion_capacity,
    mi_accuracy_bound,
    mi_accuracy_lower_bound,
    mi_negative_accuracy_bounds,
    mi_positive_advantage_bound,
    subsampled_mi_accuracy_bound,
)
from .mip import epsilon_for_mip_eta, mip_eta, mip_noise_scale, mip_norm, sample_mip_noise
from .one_run import one_run_counts, one_run_epsilon_lower_bound, one_run_p_value
from .thresholds import (
    ThresholdCertificate,
    ThresholdSelection,
    bonferroni_max,
    certify_bonferroni,
    certify_selected,
    certify_split,
    select_threshold,
)
from .xbern import effective_order, xbern_interval, xbern_interval_from_counts, xbern_moments

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
