"""The history of audits: one typed record per pipeline run, kept on the git ref ``refs/privaudit/history``.

- :mod:`privaudit.history.records`: :class:`~privaudit.history.records.AuditRecord` (when, commit, trigger,
  data, packages, params/code hashes, each defender's verdict, gated ε̂ with level, utility, detectable ε) and
  how one is built from the typed metrics files;
- :mod:`privaudit.history.store`: the JSONL file on the ref, appended atomically with git plumbing;
- :mod:`privaudit.history.regression`: a gated ε̂ that rises beyond the earlier runs' spread, and what changed;
- :mod:`privaudit.history.page`: ``reports/history.html``;
- :mod:`privaudit.history.stage`: what the ``history`` stage does (``stages/history.py`` is its glue).
"""
