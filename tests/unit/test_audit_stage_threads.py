"""The generic audit stage (``stages/_audit.py``) runs a trainer audit's fits on one BLAS/OpenMP thread, as every
other audit fit runs (canary shards, LTU reference fits): a scikit-learn fit's sums then do not depend on the
machine's core count, and the fits cost what the plan measured (``planning.fit_probe`` times them on one thread:
a digits logistic regression took 0.99 s on the 2 cores' default threads in the one-run stage, 0.04-0.07 s on one).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from threadpoolctl import threadpool_info


class _Stop(Exception):
    pass


@pytest.mark.parametrize("audit", ["one_run", "whitebox"])
def test_a_trainer_audit_runs_on_one_blas_thread(audit, monkeypatch, tmp_path) -> None:
    import privaudit.audits.runner as runner
    import privaudit.features.feature_set as feature_set
    from stages._audit import audit_stage

    seen: list[list[int]] = []

    def run_audit(*_a, **_kw):  # noqa: ANN002, ANN003, ANN202
        seen.append([(pool["internal_api"], pool["num_threads"], pool["filepath"][-40:]) for pool in threadpool_info()])
        raise _Stop

    fs = SimpleNamespace(defender=(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1])), n_classes=2)
    monkeypatch.setattr(runner, "run_audit", run_audit)
    monkeypatch.setattr(feature_set, "load_feature_set", lambda *_a: fs)
    argv = ["--params", "params.yaml", "--features", str(tmp_path / "f"), "--split", str(tmp_path / "s"),
            "--defenders", str(tmp_path / "d"), "--out", str(tmp_path / "out.json")]
    with pytest.raises(_Stop):
        audit_stage(audit, argv)
    assert seen and seen[0] and all(threads == 1 for _, threads, _ in seen[0]), seen
    assert any(pool["num_threads"] > 1 for pool in threadpool_info()) or len(__import__("os").sched_getaffinity(0)) == 1
