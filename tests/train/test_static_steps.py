"""Fixed-shape DP-SGD steps (``privaudit.train.static_steps``): the logic of the CUDA-graph path, on the CPU.

``formulation="static"`` runs exactly the steps a CUDA graph captures (the same ops, no graph), so
these tests check the graph path's logic here: the same draws as the eager path (the generator ends
in the same state), parameters equal up to float rounding, blocks whose gap draws overflowed redone
eagerly. The graph itself (capture, replay bit-identical to the static steps) is checked on CUDA in
``tests/train/test_devices.py``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.train import DPSettings, HeadRecipe, TrainData, train_heads
from privaudit.train import batched, cuda_graphs, static_steps
from privaudit.train.batched import poisson_batches, valid_row_table
from privaudit.train.heads import chunk_gradient, init_heads
from privaudit.train.observe import HeadsObserver


def _run(formulation: str, recipe: HeadRecipe, data: TrainData, classes: int, seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    heads = train_heads(recipe, data, classes, gen, formulation=formulation)
    return heads.flat(), gen.get_state()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.sampled_from([3, 6, 40, 150]), d=st.sampled_from([1, 5, 16]),
       classes=st.integers(2, 6), q=st.sampled_from([0.02, 0.3, 0.6, 1.0]), masks=st.booleans(),
       hidden=st.sampled_from([(), (4,)]), steps=st.sampled_from([1, 7, 33, 70]), extra=st.sampled_from([0, 1, 3]))
def test_static_steps_equal_the_eager_path(seed, n, d, classes, q, masks, hidden, steps, extra) -> None:
    """Property: the same draws (the generator ends in the same state) and the same parameters up to
    float rounding as the eager gather formulation — with include masks, per-model extra rows (input
    canaries, some models without them), q = 1, MLP heads, step counts below, at and above a graph's
    block, and tiny data sets whose gap blocks overflow often."""
    g = torch.Generator().manual_seed(seed)
    M = 7
    X, y = torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)
    kw = {}
    if masks:
        include = torch.rand(M, n, generator=g) < 0.7
        include[:, 0] = True  # every model some rows (the static path's condition)
        kw["include"] = include
    if extra:  # far from the base rows, so that a wrong row taken for a canary moves the parameters
        kw["X_extra"] = 5.0 + 3.0 * torch.randn(M, extra, d, generator=g)
        kw["y_extra"] = torch.randint(0, classes, (M, extra), generator=g)
        kw["extra_valid"] = torch.rand(M, extra, generator=g) < (0.6 if masks else 1.1)
    recipe = HeadRecipe(hidden, 1, 10, 0.5, dp=DPSettings(0.7, 0.8, q, steps, max(1.0, q * n)))
    ref, ref_state = _run("gather", recipe, TrainData(X, y, n_models=M, **kw), classes)
    out, state = _run("static", recipe, TrainData(X, y, n_models=M, **kw), classes)
    assert torch.equal(state, ref_state)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=2e-6)


def test_overflowing_blocks_are_redone_with_the_eager_step(monkeypatch) -> None:
    """On 4 rows at q = 0.5 one block of G = 4 gaps often ends inside the data set (all four gaps 1):
    such blocks are undone and redone eagerly, and the run still draws what the eager path draws."""
    redone = []
    real = static_steps.run_static_steps

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        redone.append(real(*args, **kwargs))
        return redone[-1]

    monkeypatch.setattr(batched, "run_static_steps", spy)
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(4, 3, generator=g), torch.randint(0, 2, (4,), generator=g)
    recipe = HeadRecipe((), 1, 2, 0.5, dp=DPSettings(0.5, 1.0, 0.5, 200, 2.0))
    ref, ref_state = _run("gather", recipe, TrainData(X, y, n_models=5), 2)
    out, state = _run("static", recipe, TrainData(X, y, n_models=5), 2)
    assert redone and 0 < redone[0] < 200 // static_steps.STEPS_PER_GRAPH + 1
    assert torch.equal(state, ref_state)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("masks", [False, True])
def test_static_batches_are_the_eager_batches_padded(masks) -> None:
    """The width-G batch's first b_max columns are :func:`poisson_batches`'s, the rest padding, from the
    same generator state to the same generator state."""
    g = torch.Generator().manual_seed(1)
    M, n, q = 30, 500, 0.05
    valid = torch.rand(M, n, generator=g) < 0.6 if masks else torch.ones(M, n, dtype=torch.bool)
    table, n_valid = valid_row_table(valid)
    stepper = static_steps.StaticDpStep.__new__(static_steps.StaticDpStep)
    stepper.M, stepper.dev, stepper.q, stepper.table, stepper.n_valid = M, torch.device("cpu"), q, table, n_valid
    stepper.G = static_steps.gap_block(q, int(n_valid.max()))
    stepper.log_keep = torch.tensor(-q).log1p().item()
    stepper.overflow = torch.zeros((), dtype=torch.bool)
    for seed in range(5):
        ga, gb = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        idx, take, counts = poisson_batches(table, n_valid, q, ga)
        sidx, stake = stepper.batches(gb)
        b = idx.shape[1]
        assert not bool(stepper.overflow)
        assert torch.equal(sidx[:, :b], idx) and torch.equal(stake[:, :b], take)
        assert not stake[:, b:].any() and not sidx[:, b:].any()
        assert torch.equal(ga.get_state(), gb.get_state())


def test_one_hot_by_mask_gives_the_scatter_bits() -> None:
    g = torch.Generator().manual_seed(2)
    heads = init_heads(5, 9, (6,), 4, g, "cpu")
    X, y = torch.randn(5, 13, 9, generator=g), torch.randint(0, 4, (5, 13), generator=g)
    a = chunk_gradient(heads.weights, heads.biases, X, y, lambda nr: 1.0 / (nr + 1.0), True)
    b = chunk_gradient(heads.weights, heads.biases, X, y, lambda nr: 1.0 / (nr + 1.0), True, one_hot_by_mask=True)
    for u, v in zip(a[0] + a[1] + [a[2]], b[0] + b[1] + [b[2]]):
        assert torch.equal(u, v)


def test_static_and_graph_formulations_refuse_what_they_cannot_run() -> None:
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(20, 3, generator=g), torch.randint(0, 2, (20,), generator=g)
    dp = HeadRecipe((), 1, 5, 0.5, dp=DPSettings(1.0, 1.0, 0.2, 3, 4.0))
    with pytest.raises(ValueError, match="'graph' captures CUDA graphs.*'static' runs"):
        train_heads(dp, TrainData(X, y, n_models=2), 2, torch.Generator(), formulation="graph")
    with pytest.raises(ValueError, match="for DP-SGD without an observer"):
        train_heads(HeadRecipe((), 1, 5, 0.5), TrainData(X, y, n_models=2), 2, torch.Generator(), formulation="static")
    with pytest.raises(ValueError, match="for DP-SGD without an observer"):
        train_heads(dp, TrainData(X, y, n_models=2), 2, torch.Generator(), formulation="static",
                    observer=HeadsObserver(seed=0))
    grad = TrainData(X, y, n_models=2, grad_canaries=torch.randn(2, 1, 3 * 2 + 2))
    with pytest.raises(ValueError, match="without gradient canaries"):
        train_heads(dp, grad, 2, torch.Generator(), formulation="static")
    with pytest.raises(ValueError, match="formulation must be one of"):
        train_heads(dp, TrainData(X, y, n_models=2), 2, torch.Generator(), formulation="fused")


def test_auto_keeps_the_eager_path_on_the_cpu(monkeypatch) -> None:
    """The CPU's numbers do not change: ``auto`` never takes the static steps there."""
    monkeypatch.setattr(batched, "StaticDpStep", None)  # would fail if constructed
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(50, 4, generator=g), torch.randint(0, 3, (50,), generator=g)
    recipe = HeadRecipe((5,), 1, 5, 0.5, dp=DPSettings(1.0, 1.0, 0.2, 4, 10.0))
    train_heads(recipe, TrainData(X, y, n_models=3), 3, torch.Generator().manual_seed(0))


def test_a_failed_capture_warns_once_and_auto_trains_eagerly(monkeypatch) -> None:
    """Capture failing (an op that syncs, an older torch) leaves ``auto`` on the eager path with one
    warning; ``formulation="graph"`` re-raises."""

    def broken(*_args):  # noqa: ANN002, ANN202
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(batched, "capture_graph", broken)
    monkeypatch.setattr(cuda_graphs, "_warned", False)

    class Plan:
        formulation = "auto"

    class Stepper:
        plan = Plan()

    with pytest.warns(RuntimeWarning, match="CUDA graph failed .*not permitted.*eager steps"):
        assert batched._graph_or_none(Stepper(), torch.Generator(), 4) is None
    Stepper.plan.formulation = "graph"
    with pytest.raises(RuntimeError, match="not permitted"):
        batched._graph_or_none(Stepper(), torch.Generator(), 4)


def _triton_or_skip() -> None:
    from privaudit.train import fused_triton

    if (why := fused_triton.available()) is not None:
        pytest.skip(why)


_INTERPRETED = """
import inspect
import torch
from triton.runtime import interpreter as _interpreter

# triton-lang/triton#9171 (triton 3.6 under numpy >= 2.4): the interpreter's scalars are 1-element arrays and
# its ``__index__`` int()s them, which numpy 2.4 refuses (a loop ``range(0, count, BR)`` fails). Its upstream fix,
# for the interpreter only; the compiled kernel never runs this code.
_patch = _interpreter._patch_lang_tensor
if len(inspect.signature(_patch).parameters) == 2:
    def _patched(tensor, scope, _patch=_patch):
        _patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
    _interpreter._patch_lang_tensor = _patched
from privaudit.train import DPSettings, HeadRecipe, TrainData, train_heads
for d, classes, q, masks in [(7, 3, 0.3, False), (16, 10, 0.5, True), (33, 2, 1.0, False)]:
    g = torch.Generator().manual_seed(d)
    M, n = 4, 70
    X, y = torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)
    kw = {"include": torch.rand(M, n, generator=g) < 0.7} if masks else {}
    recipe = HeadRecipe((), 1, 10, 0.5, dp=DPSettings(0.7, 0.8, q, 5, max(1.0, q * n)))
    runs = []
    for f in ("gather", "triton"):
        gen = torch.Generator().manual_seed(3)
        runs.append((train_heads(recipe, TrainData(X, y, n_models=M, **kw), classes, gen, formulation=f).flat(),
                     gen.get_state()))
    assert torch.equal(runs[0][1], runs[1][1]), "other draws"
    torch.testing.assert_close(runs[1][0], runs[0][0], rtol=1e-5, atol=2e-6)
from privaudit.train.fused_triton import noise_and_update
g0 = torch.Generator().manual_seed(0)
flat, g, noise = (torch.randn(37, 1029, generator=g0) for _ in range(3))
fused = flat.clone()
noise_and_update(fused, g.clone(), noise.clone(), 0.7 / 3.0, 0.5)
noise.mul_(0.7 / 3.0); g += noise; flat.sub_(g.mul_(0.5))
assert torch.equal(fused, flat), "the fused update is not the torch update's bits"
print("interpreted triton steps agree")
"""


def test_the_fused_triton_step_equals_the_eager_path_in_the_interpreter() -> None:
    """``formulation="triton"`` (the clipped sum of linear heads as one Triton kernel), run by Triton's
    interpreter on the CPU: the eager path's draws and its parameters up to float rounding (d not a
    power of two, 2-10 classes, include masks, q = 1); its fused noise-and-update pass gives the bits of
    the torch update. In a fresh process: ``TRITON_INTERPRET`` must be
    set before triton is imported. Skipped where triton is not installed (it ships with CUDA torch)."""
    _triton_or_skip()
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", _INTERPRETED], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "agree" in res.stdout, res.stdout + res.stderr[-3000:]


def test_the_triton_formulation_refuses_what_it_cannot_run(monkeypatch) -> None:
    from privaudit.train import fused_triton

    X, y = torch.randn(20, 3), torch.randint(0, 2, (20,))
    dp = HeadRecipe((), 1, 5, 0.5, dp=DPSettings(1.0, 1.0, 0.2, 3, 4.0))
    monkeypatch.setattr(fused_triton, "available", lambda: "triton cannot be imported (test)")
    with pytest.raises(ValueError, match="'triton': triton cannot be imported"):
        train_heads(dp, TrainData(X, y, n_models=2), 2, torch.Generator(), formulation="triton")
    monkeypatch.setattr(fused_triton, "available", lambda: None)
    with pytest.raises(ValueError, match="linear heads.*hidden=\\(4,\\)"):
        train_heads(HeadRecipe((4,), 1, 5, 0.5, dp=dp.dp), TrainData(X, y, n_models=2), 2, torch.Generator(),
                    formulation="triton")
    extra = TrainData(X, y, n_models=2, X_extra=torch.randn(2, 1, 3), y_extra=torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="'triton' is for DP-SGD without per-model extra rows"):
        train_heads(dp, extra, 2, torch.Generator(), formulation="triton")
    assert fused_triton.fits(512, 10) and fused_triton.fits(1024, 16) and not fused_triton.fits(2048, 10)
    assert not fused_triton.fits(512, 100)


def test_capture_leaves_nothing_behind_and_replays_the_steps(monkeypatch) -> None:
    """``capture_graph``'s own logic, with torch.cuda's stream and graph objects replaced by stand-ins
    that run the captured steps eagerly (no GPU here; the real capture is tested in test_devices.py):
    the warm-up and the capture leave the parameters, the overflow flag and the generator as they
    were, the generator is registered with the graph, and a replay is k static steps."""
    import contextlib

    calls: list = []

    class Stream:
        def __init__(self, device=None):  # noqa: ANN001
            pass

        def wait_stream(self, other):  # noqa: ANN001
            pass

    class Graph:
        registered: list = []

        def register_generator_state(self, gen):  # noqa: ANN001
            Graph.registered.append(gen)

        def replay(self):
            for step, gen in calls:
                step(gen)

    @contextlib.contextmanager
    def graph(g, pool=None, capture_error_mode="global"):  # noqa: ANN001
        assert capture_error_mode == "thread_local"
        real = stepper.step
        stepper.step = lambda gen: (calls.append((real, gen)), real(gen))  # record, and run as a capture would not
        try:
            yield
        finally:
            stepper.step = real

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)

    built = []
    real_init = static_steps.StaticDpStep.__init__

    def keep(self, **kw):  # noqa: ANN001, ANN003
        real_init(self, **kw)
        built.append(self)

    monkeypatch.setattr(static_steps.StaticDpStep, "__init__", keep)
    g = torch.Generator().manual_seed(5)
    X, y = torch.randn(90, 6, generator=g), torch.randint(0, 3, (90,), generator=g)
    recipe = HeadRecipe((), 1, 10, 0.5, dp=DPSettings(0.7, 0.8, 0.1, 9, 9.0))
    train_heads(recipe, TrainData(X, y, n_models=4), 3, torch.Generator().manual_seed(1), formulation="static")
    stepper = built[-1]
    gen = torch.Generator().manual_seed(9)
    flat0, state0 = stepper.flat.clone(), gen.get_state()
    replay = static_steps.capture_graph(stepper, gen, 3)
    assert torch.equal(stepper.flat, flat0) and torch.equal(gen.get_state(), state0)
    assert not bool(stepper.overflow) and Graph.registered == [gen] and len(calls) == 3
    replay()
    replayed, replayed_state = stepper.flat.clone(), gen.get_state()
    stepper.flat.copy_(flat0)
    gen.set_state(state0)
    for _ in range(3):
        stepper.step(gen)
    assert torch.equal(stepper.flat, replayed) and torch.equal(gen.get_state(), replayed_state)
