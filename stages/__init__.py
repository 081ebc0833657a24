"""Thin DVC stage CLIs: parse paths, read typed params, call the library, write outputs atomically.

Under ``privaudit warm -- dvc repro`` (``PRIVAUDIT_WARM_SOCKET`` set), ``python -m stages.<name>`` hands
itself to the warm stage server here, before importing anything, and exits with the stage's exit code
(:mod:`privaudit.repro.warm.client`); otherwise, or when the server cannot take it, the stage runs in this process.
"""

import os as _os

#: stages that use no heavy library (they hash files, read JSON, call git): while the server is still importing
#: they run cold at once rather than wait for it (their start-up imports none: ``tests/unit/test_stage_imports.py``)
NO_WAIT = ("stages.user_code", "stages.environment", "stages.plan", "stages.history")

if _os.environ.get("PRIVAUDIT_WARM_SOCKET"):
    from privaudit.repro.warm.client import hand_off_stage

    hand_off_stage(no_wait=NO_WAIT)
