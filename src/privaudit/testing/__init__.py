"""What the tests and the benchmarks share: planted trainers and simulations with known ground truth.

- :mod:`privaudit.testing.planted`: catalogues of honest and planted-bug trainers (opacus loops, black-box
  trainers) and the digits data they run on;
- :mod:`privaudit.testing.blackbox_runs`: the many-run black-box audit of a trainer run in-process
  (``docs/blackbox_runs.md``);
- :mod:`privaudit.testing.gate_simulation`: the gate's false-alarm rate over simulated honest audits;
- :mod:`privaudit.testing.scoring_reference`: the LTU scoring's loops as written before they were vectorised (the
  references of the bit-for-bit tests and of ``benchmarks/bench_ltu_scoring.py``).

Shipped and tested like the rest of the package, but never imported by it: nothing outside
``privaudit.testing`` imports this package (``tests/unit/test_layers.py``).
"""
