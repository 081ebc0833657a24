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
    "nudge_between_steps": "parameter Linear.weight (3, 8) changed outside a watched DP step (before watched step ",
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


def test_a_change_between_watched_steps_is_named_once_with_the_first_step_and_the_count() -> None:
    """The per-step comparison stays on the parameters' device (no host read per step); what it found is one line
    per parameter: the first watched step before which it had changed, and before how many later steps it did
    again (here after every step whose batch starts with a label-0 row: 3 of its 30 steps)."""
    import re

    X, y = tiny_data(n=120)
    with hooks.recording(seed=5) as rec:
        model = LOOPS["nudge_between_steps"].train(X, y, 3, 11)
    lines = [c for c in rec.release_changes(model) if "before watched step" in c]
    assert len(lines) == 1 and lines[0].startswith("parameter Linear.weight (3, 8) changed outside"), lines
    first, more = re.search(r"before watched step (\d+) and before (\d+) later watched steps\)", lines[0]).groups()
    assert 1 <= int(first) < rec.steps and 2 <= int(more) < rec.steps - int(first)


def test_noise_that_is_not_finite_is_refused_when_the_run_is_read() -> None:
    """A DPOptimizer whose add_noise leaves an infinite gradient: the finiteness of each step's noise is checked on
    the device and read once, so the run is refused when its observations are read, naming the cause."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    class InfiniteNoise(DPOptimizer):
        def add_noise(self) -> None:
            super().add_noise()
            self.params[0].grad.view(-1)[0] = float("inf")

    X, y = tiny_data(n=40)
    gsm = GradSampleModule(torch.nn.Linear(X.shape[1], 3))
    with hooks.recording(seed=5) as rec:
        opt = hooks.watch(InfiniteNoise(torch.optim.SGD(gsm.parameters(), lr=0.1), noise_multiplier=1.0,
                                        max_grad_norm=1.0, expected_batch_size=8), dataset_size=len(X))
        for i in range(0, 40, 8):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(gsm(torch.as_tensor(X[i:i + 8], dtype=torch.float32)),
                                              torch.as_tensor(y[i:i + 8], dtype=torch.long)).backward()
            opt.step()
    assert rec.steps == 5
    with pytest.raises(ValueError, match="noise .* is not finite after add_noise in some step"):
        rec.observations()


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
