"""The hook watches a run without changing it, and sees every change that reaches the released model.

Issue 27: the gradient canary is a *shadow* (measured on a copy of the clipped sum, never in the
step), so a watched run releases the same bits as an unwatched one; and a parameter or buffer of
the returned model that changed outside a watched DP step fails the white-box audit, naming it.
"""

from __future__ import annotations

import math

import pytest
import torch

from privaudit import hooks
from privaudit.audits.whitebox import python_trainer, whitebox_audit

from privaudit.testing.planted.opacus_loops import LOOPS
from privaudit.testing.planted.opacus_bugs import tiny_data

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook", "ignore:.*empty")

HONEST = ("correct", "bmm", "momentum", "weight_decay", "steplr", "steplr_after_watch", "step_hooks", "grad_scaler",
          "batch2")
CHANGED = {  # fault → words the failure names
    "finetune_after_dp": "changed outside a watched DP step (after the last watched step)",
    "bias_second_optimizer": "changed during training but is not trained by the watched DPOptimizer",
    "running_stats_buffer": "buffer InputNorm.running_mean",
    "returned_other_model": "net.weight (parameter Linear.weight (3, 8)) changed during training but is not trained",
}


def _weights(model) -> list[torch.Tensor]:
    return [t.detach().clone() for t in model.net.state_dict().values()]


@pytest.mark.parametrize("variant", ["correct", "bmm", "momentum", "batch2", "steplr_after_watch", "step_hooks",
                                     "grad_scaler"])
def test_a_watched_run_releases_the_same_bits(variant: str) -> None:
    X, y = tiny_data(n=120)
    train = LOOPS[variant].train
    plain = _weights(train(X, y, 3, 11))
    with hooks.recording(seed=5, canary_scale=4.0) as rec:
        watched = train(X, y, 3, 11)
    assert rec.steps > 0 and rec.release_changes(watched) == []
    for a, b in zip(plain, _weights(watched)):
        assert torch.equal(a, b)  # the canary never entered a step


@pytest.mark.parametrize("variant", HONEST)
def test_honest_loops_change_nothing_outside_watched_steps(variant: str) -> None:
    X, y = tiny_data(n=120)
    res = whitebox_audit(python_trainer(LOOPS[variant].train, 3), X, y, runs=1, seed=2, level=0.05)
    check = next(c for c in res.checks if c.name == "release_model_watched")
    assert check.passed, check.detail
    assert math.isfinite(res.epsilon) and not res.overclaims(LOOPS[variant].claim(len(X)))


@pytest.mark.parametrize("variant", sorted(CHANGED))
def test_changes_outside_watched_steps_fail_naming_the_tensor(variant: str) -> None:
    X, y = tiny_data(n=120)
    res = whitebox_audit(python_trainer(LOOPS[variant].train, 3), X, y, runs=1, seed=2, level=0.05)
    assert math.isinf(res.epsilon) and "release_model_watched" in res.failed_checks
    assert CHANGED[variant] in res.reasons[0], res.reasons[0]
    assert res.overclaims(LOOPS[variant].claim(len(X)))


def test_a_model_without_torch_tensors_cannot_be_seen() -> None:
    X, y = tiny_data(n=60)

    class Opaque:
        def predict_proba(self, X):  # pragma: no cover - never called
            return None

    def train(X, y, n_classes, seed):
        LOOPS["correct"].train(X, y, n_classes, seed)
        return Opaque()

    res = whitebox_audit(python_trainer(train, 3), X, y, runs=1, seed=2, level=0.05)
    assert math.isinf(res.epsilon) and "exposes no torch parameters" in res.reasons[0]


def test_a_model_no_training_forward_used_is_not_the_one_trained() -> None:
    X, y = tiny_data(n=60)

    class Head:
        def __init__(self) -> None:
            self.net = torch.nn.Linear(8, 3)  # built after training, never run while recording

    def train(X, y, n_classes, seed):
        LOOPS["correct"].train(X, y, n_classes, seed)
        return Head()

    res = whitebox_audit(python_trainer(train, 3), X, y, runs=1, seed=2, level=0.05)
    assert math.isinf(res.epsilon) and "was not used by any training forward pass" in res.reasons[0]
