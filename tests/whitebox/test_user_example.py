"""The README's user opacus loop (examples/opacus_user_trainer.py) is audited white-box as a kind: python defender."""

from __future__ import annotations

import numpy as np

from privaudit.defenders.registry import make_defender, spec_is_observable, validate_defender_spec
from privaudit.audits.whitebox import defender_trainer, whitebox_audit


def test_readme_user_trainer_is_audited_tightly_and_passes() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    y = rng.integers(3, size=200)
    options = {"epsilon": 2.0, "epochs": 3, "batch_size": 20}
    spec = validate_defender_spec({"name": "mine", "kind": "python", "observable": True,
                                   "target": "examples/opacus_user_trainer.py:train",
                                   "loader": "examples/opacus_user_trainer.py:load",
                                   "claimed_epsilon": 2.0, "claimed_delta": 1e-5, "options": options})
    assert spec_is_observable(spec)
    res = whitebox_audit(defender_trainer(lambda: make_defender(spec, n_classes=3)), X, y, runs=1, delta=1e-5,
                         level=0.05, accountant="prv", seed=1)
    assert res.checks_passed, res.failed_checks
    assert 0.6 * 2.0 < res.epsilon <= 2.0 + 1e-9  # tight, and no more than the accountant's ε for the loop
