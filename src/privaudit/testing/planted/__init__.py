"""Planted-bug catalogues and data shared by the benchmarks and the tests (benchmarks import nothing from tests/).

- :mod:`.blackbox_trainers`: plain numpy DP-SGD trainers (``kind: python`` protocol) with planted bugs;
- :mod:`.opacus_bugs`: opacus DP-SGD trainers with planted bugs, for the white-box audit;
- :mod:`.digits`: digits as the one-run audit sees them.
"""
