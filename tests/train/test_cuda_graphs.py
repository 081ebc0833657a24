"""SGD epochs replayed block by block (``privaudit.train.cuda_graphs``): the block logic, on the CPU.

No GPU here: the capture is replaced by a stand-in whose "replay" runs the block's steps eagerly, so these
tests check which steps run when, what a capture is given, and that the SGD trainer's steps run through the
blocks give the eager path's numbers bit for bit. The real capture (a replay equal to the eager steps bit for
bit, on CUDA) is tested in ``tests/train/test_devices.py``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.train import HeadRecipe, TrainData, batched, cuda_graphs, train_heads


class _Capture:
    """Stands in for :func:`cuda_graphs.capture`: records each capture; its replay runs the body eagerly."""

    def __init__(self, fail: bool = False) -> None:
        self.captures: list[int] = []
        self.states: list[list[torch.Tensor]] = []
        self.fail = fail

    def __call__(self, body, warm_up, state, generator=None, pool=None):  # noqa: ANN001, ANN204
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.captures.append(len(self.captures))
        self.states.append(list(state))
        return body


@settings(max_examples=30, deadline=None)
@given(n_steps=st.integers(0, 40), k=st.integers(1, 9), epochs=st.integers(1, 4))
def test_every_step_runs_once_per_epoch_in_order_and_each_block_is_captured_once(n_steps, k, epochs) -> None:
    ran: list[int] = []
    cap = _Capture()
    blocks = cuda_graphs.EpochBlocks(ran.append, range(n_steps), lambda: [torch.zeros(1)], lambda make: make(), k,
                                     cap)
    for _ in range(epochs):
        blocks.run_epoch()
    assert ran == list(range(n_steps)) * epochs
    n_blocks = -(-n_steps // k)
    # block 0 runs eagerly in the first epoch and is captured in the second; every other block at first reach
    expected = 0 if n_blocks == 0 else (n_blocks - 1 if epochs == 1 else n_blocks)
    assert len(cap.captures) == expected
    assert len(blocks.replays) == expected


def test_a_failed_capture_leaves_every_later_block_eager() -> None:
    ran: list[int] = []
    policy: list[str] = []

    def captured(make):  # noqa: ANN001, ANN202 — the "auto" policy: warn (here: note) and go on eagerly
        try:
            return make()
        except RuntimeError as exc:
            policy.append(str(exc))
            return None

    blocks = cuda_graphs.EpochBlocks(ran.append, range(10), lambda: [torch.zeros(1)], captured, 3, _Capture(fail=True))
    blocks.run_epoch()
    blocks.run_epoch()
    assert ran == list(range(10)) * 2 and blocks.failed and not blocks.replays
    assert len(policy) == 1  # tried once, then eager without retrying


def _sgd_data(seed: int, extra: bool, masks: bool) -> tuple[TrainData, int]:
    g = torch.Generator().manual_seed(seed)
    M, n, d, classes = 5, 37, 6, 3
    X, y = torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)
    kw = {}
    if masks:
        kw["include"] = torch.rand(M, n, generator=g) < 0.7
    if extra:
        kw["X_extra"] = torch.randn(M, 2, d, generator=g)
        kw["y_extra"] = torch.randint(0, classes, (M, 2), generator=g)
    return TrainData(X, y, n_models=M, **kw), classes


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 1e-3)])
@pytest.mark.parametrize("extra, masks", [(False, False), (True, True)])
def test_the_sgd_trainer_through_blocks_gives_the_eager_bits(monkeypatch, shuffle, momentum, weight_decay,
                                                             extra, masks) -> None:
    """The SGD trainer's steps run through :class:`EpochBlocks` (blocks of 2 steps; the stand-in capture)
    give the eager path's parameters and generator state bit for bit — MLP heads, a last batch smaller than
    the others, momentum (whose buffers a capture must be given to restore), shuffled and fixed orders, include
    masks and per-model extra rows."""
    recipe = HeadRecipe((4,), 3, 8, 0.3, momentum=momentum, weight_decay=weight_decay, shuffle=shuffle)
    runs = {}
    for through_blocks in (False, True):
        data, classes = _sgd_data(4, extra, masks)
        cap = _Capture()
        if through_blocks:
            monkeypatch.setattr(batched, "_sgd_graphs_fit", lambda *a: True)
            real = cuda_graphs.EpochBlocks

            def small(step, starts, state, captured, k=2, capture_fn=None, real=real):  # noqa: ANN001, ANN202
                return real(step, starts, state, captured, 2, cap)

            monkeypatch.setattr(batched, "EpochBlocks", small)
        gen = torch.Generator().manual_seed(9)
        heads = train_heads(recipe, data, classes, gen)
        runs[through_blocks] = (heads.flat(), gen.get_state(), cap)
        monkeypatch.undo()
    (a, ga, _), (b, gb, cap) = runs[False], runs[True]
    assert torch.equal(a, b) and torch.equal(ga, gb)
    assert cap.captures, "no block was captured: the test ran the eager path twice"
    n_params = 2 * len(recipe.hidden) + 2
    assert all(len(s) == n_params * (2 if momentum else 1) for s in cap.states)  # parameters (+ momentum buffers)


def test_sgd_graphs_only_on_cuda_and_not_with_gradient_canaries() -> None:
    X, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    cpu = TrainData(X, y, n_models=2)
    assert not batched._sgd_graphs_fit("auto", cpu, 5)
    assert not batched._sgd_graphs_fit("gather", cpu, 5)
    with pytest.raises(ValueError, match="'graph' captures CUDA graphs.*use 'auto'"):
        train_heads(HeadRecipe((), 2, 5, 0.5), cpu, 2, torch.Generator(), formulation="graph")
    with pytest.raises(ValueError, match="formulation='static' is for DP-SGD"):
        train_heads(HeadRecipe((), 2, 5, 0.5), cpu, 2, torch.Generator(), formulation="static")


def test_the_sgd_graph_benchmark_runs_its_dry_run() -> None:
    """``benchmarks/bench_sgd_graphs.py --dry-run`` (what ``gpu_check.sh sgd`` runs without a GPU): the script
    works and reports bit-identical parameters, for the batched trainer and the ``mlp`` defender's own fit (on the CPU
both runs are the eager path)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_sgd_graphs.py"), "--dry-run"], cwd=root,
                         capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": f"{root / 'src'}:{root}"})
    assert res.returncode == 0, res.stderr
    assert "parameters bit-identical: True" in res.stdout and "blocks captured per call 0" in res.stdout
    fit = [line for line in res.stdout.splitlines() if line.startswith("torch_mlp defender fit")]
    assert fit and "blocks captured per fit 0" in fit[0] and "bit-identical: True" in fit[0]
