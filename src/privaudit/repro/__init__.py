"""Reproducibility: what a result was computed from, and the settings that make it repeatable.

- :mod:`privaudit.repro.provenance`: the provenance stamp of the gate (code, params, data, environment);
- :mod:`privaudit.repro.environment`: the package versions a stage depends on (``data/environment.json``);
- :mod:`privaudit.repro.user_code`: the hash manifest of a user's ``kind: python`` trainer files;
- :mod:`privaudit.repro.determinism`: torch's deterministic kernels for a device;
- :mod:`privaudit.repro.worker_pool`: local worker processes for sequential fits (forked where safe, else loky's),
  with the thread limits that keep a fit the same bits wherever it runs;
- :mod:`privaudit.repro.warm`: the warm stage server (``privaudit warm -- dvc repro``): the same stages, their
  heavy imports paid once per run.
"""
