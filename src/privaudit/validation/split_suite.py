"""GX suite of the split stage: Defender/Reserved membership table (docs/architecture.md,
"Validation before work" table).

Checks: ids unique across the table (so Defender and Reserved are disjoint), roles only
``defender``/``reserved``, the Defender fraction within ``split.fraction_tolerance`` of
``split.defender_fraction``, and every class present on both sides.
"""

from __future__ import annotations

import pandas as pd

from privaudit.validation.core import check_suite

ROLES = ("defender", "reserved")


def validate_membership(
    membership: pd.DataFrame, n_classes: int, defender_fraction: float, tolerance: float
) -> None:
    """Raise :class:`ValidationFailed` unless ``membership`` (columns id, label, role) is a sound split."""
    import great_expectations.expectations as gxe

    missing = {"id", "label", "role"} - set(membership.columns)
    if missing:
        raise ValueError(f"membership table lacks columns {sorted(missing)}")
    frame = membership.reset_index(drop=True).assign(
        is_defender=(membership["role"].to_numpy() == "defender").astype(int)
    )
    classes = list(range(n_classes))
    batches = {
        "membership": frame,
        "defender": frame[frame["role"] == "defender"],
        "reserved": frame[frame["role"] == "reserved"],
    }
    expectations = {
        "membership": [
            gxe.ExpectColumnValuesToBeUnique(column="id", description="ids unique, so Defender and Reserved are disjoint"),
            gxe.ExpectColumnValuesToNotBeNull(column="id", description="ids non-null"),
            gxe.ExpectColumnValuesToBeInSet(column="role", value_set=list(ROLES), description="role is defender or reserved"),
            gxe.ExpectColumnValuesToBeInSet(column="label", value_set=classes,
                                            description=f"labels are integers in [0, {n_classes})"),
            gxe.ExpectColumnMeanToBeBetween(
                column="is_defender",
                min_value=max(0.0, defender_fraction - tolerance),
                max_value=min(1.0, defender_fraction + tolerance),
                description="Defender fraction within split.fraction_tolerance of split.defender_fraction",
            ),
        ],
        "defender": [gxe.ExpectColumnDistinctValuesToContainSet(column="label", value_set=classes,
                                                               description="every class on the Defender side")],
        "reserved": [gxe.ExpectColumnDistinctValuesToContainSet(column="label", value_set=classes,
                                                               description="every class on the Reserved side")],
    }
    check_suite("split", batches, expectations, subject=f"{len(frame)} samples, {n_classes} classes")
