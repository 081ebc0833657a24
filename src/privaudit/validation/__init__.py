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
"""

from privaudit.validation.canary_suite import validate_canary_stats
from privaudit.validation.core import check_suite
from privaudit.validation.outcomes import ExpectationFailure, ValidationFailed
from privaudit.validation.defender_suite import validate_defender_outputs
from privaudit.validation.features_suite import validate_features
from privaudit.validation.metrics_suite import validate_metrics
from privaudit.validation.model_files import ModelFileError, check_model_file
from privaudit.validation.source_suite import validate_source
from privaudit.validation.split_suite import validate_membership

__all__ = [
    "ExpectationFailure",
    "ModelFileError",
    "ValidationFailed",
    "check_model_file",
    "check_suite",
    "validate_canary_stats",
    "validate_defender_outputs",
    "validate_features",
    "validate_membership",
    "validate_metrics",
    "validate_source",
]
