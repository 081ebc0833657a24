"""Thin DVC stage CLIs: parse paths, read typed params, call the library, write outputs atomically.

Under ``privaudit warm -- dvc repro`` (``PRIVAUDIT_WARM_SOCKET`` set), ``python -m stages.<name>`` hands
itself to the warm stage server here, before importing anything, and exits with the stage's exit code
(:mod:`privaudit.repro.warm.client`); otherwise, or when the server cannot take it, the stage runs in this process.
"""

import os as _os

#: stages that use no heavy library (they hash files, read JSON, call git): while the server is still importing
#: they run cold at once rather than wait for it (their start-up imports none: ``tests/unit/test_stage_imports.py``)
NO_WAIT = ("stages.user_code", "stages.environment", "stages.plan", "stages.history")
#: the first stage that uses heavy libraries: it starts a second or so after the server, which then imports for
#: another 10-13 s on 2 cores, while its own cold imports (pandas, Great Expectations) take about 5 s beside the
#: server's; run cold rather than wait, the default audit's ingest took 6.3-6.4 s instead of 11.2-14.8 s and the
#: defenders stage started 2.1-5.9 s earlier (2 alternating pairs, ``docs/results.md``, session 55)
COLD_WHILE_STARTING = ("stages.ingest",)

if _os.environ.get("PRIVAUDIT_WARM_SOCKET"):
    from privaudit.repro.warm.client import hand_off_stage

    hand_off_stage(no_wait=NO_WAIT + COLD_WHILE_STARTING)
