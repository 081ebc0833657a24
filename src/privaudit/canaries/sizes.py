"""Canary-experiment sizes that depend on the data, resolved and checked as soon as the sizes are known.

The split stage is the first stage that knows the Defender and Reserved set sizes, so it runs
:func:`check_canary_sizes` before any model is trained (the canaries stage repeats the check on
its own inputs). Every message names the ``params.yaml`` key and how to fix it.

``game3.canaries: auto`` (:func:`resolve_game3_canaries`)
    ``min(1000, floor(n_defender / 4))``: a quarter of the Defender set — the share the digits
    default of 200 canaries among 898 Defender samples used — and at most the 1000 canaries of
    the single-run Game 3 of Malek et al. 2021 (Table 5). Game-3 canaries are distinct
    Defender samples of one training run, so an explicit number must not exceed the Defender
    set; ``auto`` needs at least 8 Defender samples (2 canaries; 16 samples / 4 canaries with
    ``game3.tau_selection: split``).
"""

from __future__ import annotations

from privaudit.canaries.plan import CanaryPlan

#: ``game3.canaries: auto`` uses this share of the Defender set ...
GAME3_AUTO_SHARE = 4  # n_defender // 4
#: ... and at most this many canaries (Malek et al. 2021, Table 5: one run of 1000 canaries)
GAME3_AUTO_MAX = 1000


def game3_min_canaries(tau_selection: str = "bonferroni") -> int:
    """Fewest Game-3 canaries the audit accepts: 4 when τ is tuned on a separate half, else 2."""
    return 4 if tau_selection == "split" else 2


def resolve_game3_canaries(n_defender: int, setting: int | str, tau_selection: str = "bonferroni") -> int:
    """The number of Game-3 canaries per run for ``game3.canaries = setting``.

    Args:
        n_defender: size of the Defender (training) set.
        setting: an explicit count (returned as is after the checks) or ``"auto"``
            (``min(1000, n_defender // 4)``, see the module docstring).
        tau_selection: ``game3.tau_selection`` (``split`` needs at least 4 canaries).

    Raises:
        ValueError: naming ``game3.canaries`` and the fix, when the count exceeds the Defender set
            or is below the minimum of the chosen τ selection.

    >>> resolve_game3_canaries(898, "auto"), resolve_game3_canaries(200, "auto"), resolve_game3_canaries(10**5, "auto")
    (224, 50, 1000)
    >>> resolve_game3_canaries(898, 200)
    200
    """
    n_defender = int(n_defender)
    low = game3_min_canaries(tau_selection)
    split_note = " with game3.tau_selection: split" if tau_selection == "split" else ""
    if isinstance(setting, str):
        if setting != "auto":
            raise ValueError(f"game3.canaries must be a count or 'auto', got {setting!r}")
        n = min(GAME3_AUTO_MAX, n_defender // GAME3_AUTO_SHARE)
        if n < low:
            raise ValueError(
                f"game3.canaries: auto = min({GAME3_AUTO_MAX}, {n_defender} Defender samples // "
                f"{GAME3_AUTO_SHARE}) = {n} is below the {low} canaries Game 3 needs{split_note}; use a larger "
                f"data set (dataset.max_samples) or split.defender_fraction, or set game3.canaries to a count "
                f"between {low} and {n_defender}")
        return n
    if isinstance(setting, bool) or not isinstance(setting, int):
        raise ValueError(f"game3.canaries must be a count or 'auto', got {setting!r}")
    if setting > n_defender:
        raise ValueError(
            f"game3.canaries={setting} exceeds the {n_defender} Defender samples (Game-3 canaries are distinct "
            f"Defender samples); set game3.canaries: auto (here {min(GAME3_AUTO_MAX, n_defender // GAME3_AUTO_SHARE)}) "
            f"or a count <= {n_defender}")
    if setting < low:
        raise ValueError(f"game3.canaries={setting} is below the {low} canaries Game 3 needs{split_note}; "
                         f"set game3.canaries: auto or a count >= {low}")
    return setting


def game3_canaries(plan: CanaryPlan, n_defender: int) -> int:
    """``game3.canaries`` of ``plan`` resolved for a Defender set of ``n_defender`` samples."""
    g = plan.game3
    return resolve_game3_canaries(n_defender, g.canaries, g.tau_selection)


def check_canary_sizes(plan: CanaryPlan, n_defender: int, n_reserved: int, n_features: int | None = None) -> None:
    """Check every canary-experiment size that depends on the data (before any training).

    Args:
        plan: the canary plan (:class:`privaudit.canaries.plan.CanaryPlan`).
        n_defender, n_reserved: sizes of the Defender set and of the Reserved (canary) pool.
        n_features: feature dimension, when known (``lidp.clipbkd_pool`` <= min(n, d)); the split
            stage knows it only for ``featurize.backbone: identity``.

    Raises:
        ValueError: the first size that does not fit, naming the params key and the fix.
    """
    game3_canaries(plan, n_defender)
    lp = plan.lidp
    k, m = lp.k_canaries(), lp.m_null()
    if k < 1 or m < 1:
        raise ValueError("lidp.canaries and lidp.null_canaries must be >= 1")
    if lp.canary_type == "mislabel" and k + m > n_reserved:
        # canaries are i.i.d. draws from the pool; more than the pool per trial would mostly
        # repeat samples and test a different design than the one the user asked for
        raise ValueError(
            f"lidp.canaries + lidp.null_canaries = {k} + {m} exceeds the canary pool of {n_reserved} Reserved "
            f"samples (lidp.canary_type: mislabel draws canaries from it); lower lidp.canaries / "
            f"lidp.null_canaries (auto: K = round(sqrt(lidp.trials)), m = K) or lidp.trials, or use more data")
    if lp.canary_type == "clipbkd" and n_features is not None and lp.clipbkd_pool > min(n_defender, n_features):
        raise ValueError(f"lidp.clipbkd_pool={lp.clipbkd_pool} exceeds min(n, d) = {min(n_defender, n_features)}; "
                         "set lidp.clipbkd_pool: 0 (min(n, d) // 4) or a smaller pool")
    if lp.tau_selection == "split":
        n_tune = int(lp.trials * lp.tune_fraction)
        if n_tune < 1 or lp.trials - n_tune < 1:
            raise ValueError(f"lidp.trials={lp.trials} with lidp.tune_fraction={lp.tune_fraction} leaves an empty "
                             "tuning or certification set; raise lidp.trials or move lidp.tune_fraction towards 0.5")
