"""Prefect flows of privaudit (the only place, with the stage glue, that imports prefect).

- :mod:`flows.audit`: the DVC pipeline under a concurrency limit of one; verdict artifacts.
- :mod:`flows.validate`: Great Expectations checks of a new data drop; starts the audit.
- :mod:`flows.canary_trials`: canary trial shards on a Dask cluster, then the pipeline.
- :mod:`flows.deploy`: the deployments (nightly audit, hourly validation) served by one process.

Run them from the repository root (deployment entrypoints are ``flows/<module>.py:<flow>``);
``python -m flows.<module> --help`` lists each one's arguments.

Importing this package switches off the usage telemetry of Prefect, DVC and Great Expectations
for this process and its subprocesses (the same settings as the Makefile's exports), before
any of them is imported: ``python -m flows.audit`` started by hand sends nothing either. A value
already set in the environment is kept (set ``DO_NOT_TRACK=0`` etc. to opt back in). It also gives the ephemeral
Prefect server a one-shot flow starts two minutes to come up (:data:`STARTUP_TIMEOUTS`).
"""

from __future__ import annotations

import os

#: environment defaults applied on import (``setdefault``: an explicit setting wins)
NO_TELEMETRY = {
    "DO_NOT_TRACK": "1",  # Prefect client analytics, and the general convention
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",  # an ephemeral/local Prefect server started from here
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "False",
}

#: how long a one-shot flow waits for the ephemeral Prefect server it starts (Prefect's default, 20 s, was too short
#: for a first run on 2 loaded cores: the server took 24 s and the flow died with "Timed out while attempting to
#: connect to ephemeral Prefect API server"); an explicit setting wins
STARTUP_TIMEOUTS = {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}

for _key, _value in {**NO_TELEMETRY, **STARTUP_TIMEOUTS}.items():
    os.environ.setdefault(_key, _value)
