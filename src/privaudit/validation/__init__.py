"""Great Expectations suites guarding the pipeline's stages (built in code).

Each stage validates its inputs and its outputs before moving them into place; a failure
raises :class:`ValidationFailed` naming the suite, the expectation and a few offending rows.
"""

from privaudit.validation.core import ExpectationFailure, ValidationFailed, run_suite
from privaudit.validation.split_suite import validate_membership

__all__ = ["ExpectationFailure", "ValidationFailed", "run_suite", "validate_membership"]
