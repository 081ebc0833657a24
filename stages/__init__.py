"""Thin DVC stage CLIs: parse paths, read typed params, call the library, write outputs atomically.

Under ``privaudit warm -- dvc repro`` (``PRIVAUDIT_WARM_SOCKET`` set), ``python -m stages.<name>`` hands
itself to the warm stage server here, before importing anything, and exits with the stage's exit code
(:mod:`privaudit.repro.warm.client`); otherwise, or when the server cannot take it, the stage runs in this process.
"""

import os as _os

if _os.environ.get("PRIVAUDIT_WARM_SOCKET"):
    from privaudit.repro.warm.client import hand_off_stage

    hand_off_stage()
