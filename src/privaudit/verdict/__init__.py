"""The verdict: the decision, and nothing that says what a claim is (that is :mod:`privaudit.claims`).

- :mod:`privaudit.verdict.claim_check`: a claim against the audited ε lower bounds;
- :mod:`privaudit.verdict.metrics_files`: the typed ``metrics/*.json`` contract (one reader each);
- :mod:`privaudit.verdict.entry`: the merge of the audits' blocks into ``metrics/audit.json``;
- :mod:`privaudit.verdict.theory`: attack accuracy against the claim's membership-inference bounds;
- :mod:`privaudit.verdict.gate`: the release gate (``metrics/gate.json``).

It sits above :mod:`privaudit.claims` (the claim, its mechanism, the registry of audits, the error budget) and
the statistics (``privaudit.stats``), and below the audits; it imports no audit, no report and no
``privaudit.config`` (the gate reads any object with the ``gate.*`` fields:
:class:`privaudit.verdict.gate.GateSettings`).
"""
