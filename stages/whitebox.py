"""Stage whitebox: white-box DP-SGD audit of every observable defender → ``data/audit/whitebox.json`` (the generic audit stage, ``stages/_audit.py``)."""

from __future__ import annotations

import sys

from stages._audit import audit_stage

if __name__ == "__main__":
    sys.exit(audit_stage("whitebox"))
