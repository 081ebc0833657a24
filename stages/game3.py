"""Stage game3: Game-3 ε interval of every audited defender → ``data/audit/game3.json`` (the generic audit stage, ``stages/_audit.py``)."""

from __future__ import annotations

import sys

from stages._audit import audit_stage

if __name__ == "__main__":
    sys.exit(audit_stage("game3"))
