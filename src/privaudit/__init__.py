"""privaudit: reproducible membership-inference and differential-privacy audits.

The library is pure and importable; the DVC stages in ``stages/`` and the Prefect
flows in ``flows/`` are thin glue around it.
"""

__version__ = "0.1.0"
