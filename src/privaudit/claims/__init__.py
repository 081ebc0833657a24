"""What a privacy claim is: the neighbourhood, the declared mechanisms, the claim and its parsing, the audit
registry, the error budget, and the composition of claims (:mod:`privaudit.claims.composition`).

A low layer: pydantic, numpy/scipy through :mod:`privaudit.stats`, dp_accounting imported lazily. It imports
no audit, report, config, planning or verdict module.
"""
