"""``kind: torch_mlp``'s fit with its epochs replayed as CUDA graphs (``privaudit.defenders.torch_head``): the logic,
on the CPU.

No GPU here: the capture is a stand-in that runs the warm-up, restores what the capture is told to restore (as
:func:`privaudit.train.cuda_graphs.capture` does) and "replays" by running the block eagerly. So these tests check
that the fit run through :class:`~privaudit.train.cuda_graphs.EpochBlocks` gives the eager loop's model bit for
bit — the epoch's order refreshed in the one buffer the steps read, every step once per epoch, and the state a
warm-up moves (parameters, momentum buffers) restored in full (a buffer left out moves the model). The real
capture on CUDA (a replay equal to the eager loop bit for bit) is tested in ``tests/train/test_devices.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.defenders import torch_head
from privaudit.defenders.registry import make_defender, validate_defender_spec
from privaudit.train import cuda_graphs


class _Capture:
    """Stands in for :func:`cuda_graphs.capture` without a GPU: warm-up, then the state restored; replay = the body."""

    def __init__(self, drop_last_state: bool = False) -> None:
        self.captures = 0
        self.states: list[int] = []
        self.drop_last_state = drop_last_state

    def __call__(self, body, warm_up, state, generator=None, pool=None):  # noqa: ANN001, ANN204
        state = list(state)[:-1] if self.drop_last_state else list(state)
        saved = [t.clone() for t in state]
        warm_up()
        for t, s in zip(state, saved):
            t.copy_(s)
        self.captures += 1
        self.states.append(len(state))
        return body


def _fit(spec: dict, X: np.ndarray, y: np.ndarray, monkeypatch: pytest.MonkeyPatch, cap: _Capture | None):
    monkeypatch.undo()
    if cap is not None:
        monkeypatch.setattr(torch_head, "graphed_epochs_fit", lambda device, epochs: epochs >= 2)
        real = cuda_graphs.EpochBlocks

        def small(step, starts, state, captured, k=3, capture_fn=None):  # noqa: ANN001, ANN202
            return real(step, starts, state, captured, 3, cap)

        monkeypatch.setattr(cuda_graphs, "EpochBlocks", small)
    model = make_defender(validate_defender_spec({"name": "m", **spec}, where="defenders[0]"), 3)
    model.fit(X, y, seed=5)
    monkeypatch.undo()
    return {k: v.clone() for k, v in model.net.state_dict().items()}


@pytest.mark.parametrize("spec", [
    {"kind": "torch_mlp", "hidden": [8], "epochs": 3, "batch_size": 7, "momentum": 0.9, "weight_decay": 1e-3},
    {"kind": "torch_mlp", "hidden": [], "epochs": 2, "batch_size": 5, "momentum": 0.0, "randomness": "fixed"},
    {"kind": "torch_mlp", "hidden": [6, 4], "epochs": 4, "batch_size": 9, "randomness": "unseeded"},
])
def test_the_fit_through_epoch_blocks_gives_the_eager_loops_model_bit_for_bit(spec, monkeypatch) -> None:
    """40 rows in batches of 5-9 (a last batch smaller than the others), blocks of 3 steps, 2-4 epochs,
    momentum (whose buffers a capture restores) or none, shuffled, fixed and unseeded orders."""
    g = np.random.default_rng(0)
    X, y = g.normal(size=(40, 6)).astype(np.float32), g.integers(0, 3, 40)
    eager = _fit(spec, X, y, monkeypatch, None)
    cap = _Capture()
    graphed = _fit(spec, X, y, monkeypatch, cap)
    assert cap.captures, "no block was captured: the test ran the eager loop twice"
    assert eager.keys() == graphed.keys()
    assert all(torch.equal(eager[k], graphed[k]) for k in eager), "the graphed fit's model differs from the eager fit's"
    n_params = 2 * (len(spec["hidden"]) + 1)
    assert set(cap.states) == {n_params * (2 if spec.get("momentum", 0.9) else 1)}


def test_a_capture_that_restores_too_little_moves_the_model(monkeypatch) -> None:
    """The check above can fail: a warm-up whose last state tensor (a momentum buffer) is not restored changes
    the model."""
    spec = {"kind": "torch_mlp", "hidden": [8], "epochs": 3, "batch_size": 7, "momentum": 0.9}
    g = np.random.default_rng(1)
    X, y = g.normal(size=(40, 6)).astype(np.float32), g.integers(0, 3, 40)
    eager = _fit(spec, X, y, monkeypatch, None)
    graphed = _fit(spec, X, y, monkeypatch, _Capture(drop_last_state=True))
    assert not all(torch.equal(eager[k], graphed[k]) for k in eager)


def test_graphed_epochs_only_on_cuda_from_two_epochs(monkeypatch) -> None:
    assert not torch_head.graphed_epochs_fit("cpu", 30)
    assert torch_head.graphed_epochs_fit("cuda", 2) and torch_head.graphed_epochs_fit("cuda:1", 30)
    assert not torch_head.graphed_epochs_fit("cuda", 1)
    monkeypatch.setattr(torch_head, "GRAPHED_EPOCHS", False)
    assert not torch_head.graphed_epochs_fit("cuda", 30)
