"""A warm stage server: the heavy libraries imported once per pipeline run, not once per DVC stage.

Every DVC stage is a new ``python -m stages.<name>`` process; on the default audit more than half of each
stage's wall went to importing Great Expectations, torch, scikit-learn, skops and scipy again (measured in
``benchmarks/results/warm_stages_cpu.txt``). ``privaudit warm -- dvc repro`` (what ``make audit`` runs) starts a
server (:mod:`privaudit.repro.warm.server`) that imports those libraries once and forks a child per stage; the stage
process DVC started (the client, :mod:`privaudit.repro.warm.client`, hooked into ``stages/__init__.py``) passes its
arguments, working directory, environment and standard streams to the server and exits with the child's exit
code. The child imports privaudit and the stage fresh from disk, so an edit to the code is never served stale.

The same idea as Rails' Spring or Nailgun, kept narrow: only ``stages.*`` modules, only a client with the same
interpreter and the same interpreter-level environment (``PYTHON*``, thread counts, visible devices) as the
server; anything else runs cold, as a plain ``dvc repro`` always does.
"""
