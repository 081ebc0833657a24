"""The cost of an audit before it is paid: fits planned per defender and audit, the measured seconds per
fit, the estimated wall time, and the black-box run counts sized to ``compute.budget_minutes``
(:mod:`privaudit.planning.cost`); measured fit times live outside the DVC outputs
(:mod:`privaudit.planning.timings`)."""
