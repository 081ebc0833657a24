"""The neighbourhood a DP claim is made for: what two neighbouring data sets differ in (one name per relation;
its value is what ``params.yaml`` and the metrics files say)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Neighbourhood"]


class Neighbourhood(StrEnum):
    """What two neighbouring data sets differ in, the one name of each relation (its value is what
    ``params.yaml`` and the metrics files say): one record added or removed (DP-SGD's unit), one record
    replaced, or one record's label replaced (label DP)."""

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"
    REPLACE_LABEL = "replace_label"
