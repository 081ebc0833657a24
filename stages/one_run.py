"""Stage one_run: one-run black-box audit (input-space canaries) of every defender → ``data/audit/one_run.json`` (the generic audit stage, ``stages/_audit.py``)."""

from __future__ import annotations

import sys

from stages._audit import audit_stage

if __name__ == "__main__":
    sys.exit(audit_stage("one_run"))
