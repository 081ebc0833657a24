"""The verdict: what a claim is, how the error budget is shared, which audits exist, and the release gate.

- :mod:`privaudit.claims.claim`: a privacy claim and the mechanism it carries (its trade-off curve);
- :mod:`privaudit.verdict.error_budget`: ``gate.beta`` planned once and shared over the gated bounds as
  each audit's ``level``;
- :mod:`privaudit.verdict.registry`: the registry of audits (one line per audit, the only list of them);
- :mod:`privaudit.verdict.claim_check`: a claim against the audited ε lower bounds;
- :mod:`privaudit.verdict.metrics_files`: the typed ``metrics/*.json`` contract (one reader each);
- :mod:`privaudit.verdict.entry`: the merge of the audits' blocks into ``metrics/audit.json``;
- :mod:`privaudit.verdict.theory`: attack accuracy against the claim's membership-inference bounds;
- :mod:`privaudit.verdict.gate`: the release gate (``metrics/gate.json``).

It sits above the statistics (``privaudit.stats``) and below the audits, which import the registry, the
claims and the metrics models; it imports no audit, no report and no ``privaudit.config`` (the gate reads
any object with the ``gate.*`` fields: :class:`privaudit.verdict.gate.GateSettings`).
"""
