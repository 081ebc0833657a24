"""The audits: one family, one protocol, one error budget.

Each module audits one thing and follows :mod:`privaudit.audits.protocol` (``CITATION`` and
``run(request, inputs, settings) -> AuditBound``); each is one line of
:data:`privaudit.claims.registry.AUDITS`:

- :mod:`.whitebox` — white-box DP-SGD audit (Nasr et al. 2023; Andrew et al. 2024);
- :mod:`.one_run` — one-run black-box audit with input-space canaries (Steinke, Nasr & Jagielski 2023);
- :mod:`.lidp` — Lifted-DP audit of canary trials (Pillutla et al. 2023, Algorithm 1); its
  self-check on a Gaussian mechanism with known ε in :mod:`.lidp_self_check`;
- :mod:`.game3` — Game 3 of label-DP (Malek et al. 2021, App. B);
- :mod:`.theory` — the theory check: the LTU attack accuracy against the MI accuracy bounds a claim
  implies (Thudi et al. 2022; Izzo et al. 2023).

Beside them: :mod:`.protocol` (request, inputs, the typed bound), :mod:`.runner` (the per-defender
loop, written once), :mod:`.entry` (the merge into ``metrics/audit.json``) and :mod:`.ltu` (the LTU
evaluation of every defender, whose accuracy the theory check reads). Nothing is imported here:
import the module you need.
"""
