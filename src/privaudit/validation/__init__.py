"""Great Expectations suites guarding the pipeline's stages (built in code, one builder per stage).

Each stage validates its inputs and its outputs before moving them into place; a failure
raises :class:`ValidationFailed` naming the suite, the expectation and a few offending rows.
Every run is recorded in the Data Docs under ``reports/validation/`` (:mod:`.docs`).

=====================  ==================  ===========================================
function               suite               stage(s)
=====================  ==================  ===========================================
validate_source        ``source``          ingest (output), split/featurize (input)
validate_membership    ``split``           split (output)
validate_features      ``features``        featurize (output), defenders (input)
validate_defender_...  ``defender_outputs`` defenders (output), ltu (input)
validate_canary_stats  ``canaries``        canaries (output), game3/lidp (input)
validate_metrics       ``metrics``         ltu, game3, lidp, bounds, report (outputs)
=====================  ==================  ===========================================

Importing the package imports none of its suites (nor pandas or Great Expectations): each name below
is imported from its module on first use, so a stage that only reads JSON starts without them.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports (name -> module): the suites import pandas, and running one imports Great Expectations.
_EXPORTS: dict[str, str] = {
    "ExpectationFailure": "privaudit.validation.outcomes",
    "ModelFileError": "privaudit.validation.model_files",
    "ValidationFailed": "privaudit.validation.outcomes",
    "check_model_file": "privaudit.validation.model_files",
    "check_suite": "privaudit.validation.core",
    "validate_canary_stats": "privaudit.validation.canary_suite",
    "validate_defender_outputs": "privaudit.validation.defender_suite",
    "validate_features": "privaudit.validation.features_suite",
    "validate_membership": "privaudit.validation.split_suite",
    "validate_metrics": "privaudit.validation.metrics_suite",
    "validate_source": "privaudit.validation.source_suite",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name from its submodule on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'privaudit.validation' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """Exported names, for completion."""
    return sorted([*globals(), *_EXPORTS])
