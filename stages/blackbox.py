"""Stage blackbox: many-run black-box audit (final models, crafted canary; GDP view and assumption-free) of every audited defender → ``data/audit/blackbox.json`` (the generic audit stage, ``stages/_audit.py``)."""

from __future__ import annotations

import sys

from stages._audit import audit_stage

if __name__ == "__main__":
    sys.exit(audit_stage("blackbox"))
