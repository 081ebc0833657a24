"""The batched trainer on a CUDA device.

The ``cuda`` cases are skipped on a machine without one (they are the suite's CUDA tests: run them
on a GPU machine with ``pytest tests/train/test_devices.py``); the ``cpu`` cases run everywhere and
check the tests themselves. CUDA draws other random numbers than the CPU from the same seed, so
numbers are compared only where no draw matters (q = 1: every row in every batch; σ = 0: the noise
is multiplied by zero; the same θ_0 passed in) and the draws are checked for their distribution.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from privaudit.train import DPSettings, HeadRecipe, StackedHeads, TrainData, initial_heads, train_heads
from privaudit.train.batched import _Plan, poisson_batches
from privaudit.train.observe import HeadsObserver
from privaudit.train.static_steps import STEPS_PER_GRAPH

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                 reason="no CUDA device on this machine"))]
M, N, D, CLASSES = 48, 300, 24, 4


@pytest.fixture
def counted_captures(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Deterministic kernels (as the pipeline trains) for the test, and the list of CUDA-graph captures it made."""
    from privaudit.train import cuda_graphs

    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    captures: list[int] = []
    real = cuda_graphs.capture
    monkeypatch.setattr(cuda_graphs, "capture", lambda *a, **kw: (captures.append(1), real(*a, **kw))[1])
    yield captures
    torch.use_deterministic_algorithms(before)


def _rows() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, D, generator=g), torch.randint(0, CLASSES, (N,), generator=g)


def _to(heads: StackedHeads, device: str) -> StackedHeads:
    return StackedHeads([w.to(device) for w in heads.weights], [b.to(device) for b in heads.biases])


def _train_both(recipe: HeadRecipe, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The same recipe from the same θ_0 on the CPU and on ``device``: flat parameters (on the CPU) of
    the device's run, the CPU's run and θ_0."""
    X, y = _rows()
    init = initial_heads(recipe, TrainData(X, y, n_models=M), CLASSES, torch.Generator().manual_seed(1))
    ref = train_heads(recipe, TrainData(X, y, n_models=M), CLASSES, torch.Generator().manual_seed(2), init=init)
    out = train_heads(recipe, TrainData(X.to(device), y.to(device), n_models=M), CLASSES,
                      torch.Generator(device=device).manual_seed(2), init=_to(init, device))
    assert out.weights[0].device.type == torch.device(device).type
    return out.flat().cpu(), ref.flat(), init.flat()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("hidden", [(), (16,)])
def test_dp_sgd_on_the_device_matches_the_cpu_where_no_draw_matters(device: str, hidden: tuple[int, ...]) -> None:
    """Per-example clipping (C = 0.5 clips most examples here), chunking and the update are the same
    computation on the device: parameters agree with the CPU's up to float32 rounding."""
    recipe = HeadRecipe(hidden, 1, N, 0.5, dp=DPSettings(0.0, 0.5, 1.0, 25, float(N)))
    out, ref, theta0 = _train_both(recipe, device)
    assert (ref - theta0).abs().max() > 0.05  # training moved the parameters
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_sgd_in_data_order_on_the_device_matches_the_cpu(device: str) -> None:
    recipe = HeadRecipe((8,), 3, 64, 0.1, momentum=0.9, weight_decay=1e-3, shuffle=False)
    out, ref, theta0 = _train_both(recipe, device)
    assert (ref - theta0).abs().max() > 0.05
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_poisson_batches_on_the_device_have_the_right_sizes(device: str) -> None:
    """Batch sizes drawn on the device are Binomial(n, q): mean and variance within 5 standard errors."""
    q, steps = 0.05, 50
    gen = torch.Generator(device=device).manual_seed(0)
    n_valid = torch.full((256,), 1000, dtype=torch.long, device=device)
    sizes = []
    for _ in range(steps):
        idx, take, counts = poisson_batches(None, n_valid, q, gen)
        assert idx.device.type == torch.device(device).type and bool((idx[take] < 1000).all())
        assert torch.equal(take.sum(1), counts)
        sizes.append(counts.double().cpu())
    s = torch.cat(sizes)
    mean, var = 1000 * q, 1000 * q * (1 - q)
    assert abs(float(s.mean()) - mean) < 5 * (var / s.numel()) ** 0.5
    assert abs(float(s.var()) / var - 1) < 5 * (2 / s.numel()) ** 0.5


@pytest.mark.parametrize("device", DEVICES)
def test_white_box_observer_on_the_device(device: str) -> None:
    """The observer draws its canaries and keeps its summaries on the training device (no host copy per
    step); the summaries come back to the host once, from ``runs``."""
    X, y = _rows()
    recipe = HeadRecipe((), 1, N, 0.5, dp=DPSettings(1.0, 1.0, 1.0, 5, float(N)))
    obs = HeadsObserver(seed=0)
    train_heads(recipe, TrainData(X.to(device), y.to(device), n_models=M), CLASSES,
                torch.Generator(device=device).manual_seed(2), observer=obs)
    canary, effect = obs.canaries(M, 7, 1.0, device)
    assert canary.device.type == effect.device.type == torch.device(device).type
    assert obs.steps == 5
    runs = obs.runs(dataset_size=N)
    assert len(runs) == M and all((r.batch_rows == N).all() for r in runs)
    sens = np.stack([r.sensitivity for r in runs])
    np.testing.assert_allclose(sens, 1.0, rtol=0, atol=1e-5)  # clipped to C
    P = D * CLASSES + CLASSES
    sq = np.stack([r.noise_sq for r in runs])  # ‖N_t‖² ≈ σ²C²P
    assert abs(sq.mean() / P - 1) < 0.05


def test_one_observer_draws_on_one_device() -> None:
    """An observer's canary generator lives on the device of its first draw; a second device is refused
    with a message (its draws would silently restart from another generator)."""
    obs = HeadsObserver(seed=0)
    obs.canaries(2, 3, 1.0, "cpu")
    with pytest.raises(ValueError, match="one observer per device"):
        obs.canaries(2, 3, 1.0, "meta")


def test_observer_canaries_on_the_cpu_are_those_of_a_cpu_generator_with_its_seed() -> None:
    """On the CPU the canary directions are the seed's CPU draws (float32 normals, normalised in float64):
    the device-resident observer changed no CPU number."""
    obs = HeadsObserver(seed=3, canary_scale=4.0)
    clipped, effect = obs.canaries(5, 11, 2.0)
    u = torch.randn(5, 11, generator=torch.Generator().manual_seed(3)).double()
    u *= (4.0 * 2.0) / torch.linalg.vector_norm(u, dim=1, keepdim=True)
    u *= (2.0 / (torch.linalg.vector_norm(u, dim=1) + 1e-6)).clamp(max=1.0).unsqueeze(1)
    assert torch.equal(clipped, u)
    torch.testing.assert_close(effect, torch.full((5,), 2.0, dtype=torch.float64), rtol=1e-6, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("hidden", [(), (8,)])
def test_training_runs_under_the_pipelines_deterministic_kernels(device: str, hidden: tuple[int, ...],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``base.device: cuda`` the stages turn on ``torch.use_deterministic_algorithms``, which
    refuses any op without a deterministic CUDA kernel (a float ``cumsum`` in the Poisson sampler did):
    DP-SGD with Poisson batches, extra rows, gradient canaries and the observer, and SGD with
    shuffling, must run under it and give the same parameters twice."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        g = torch.Generator().manual_seed(4)
        X, y = _rows()
        P = D * CLASSES + CLASSES if not hidden else D * hidden[0] + hidden[0] + hidden[0] * CLASSES + CLASSES
        data = dict(include=torch.rand(M, N, generator=g) < 0.7, X_extra=torch.randn(M, 2, D, generator=g),
                    y_extra=torch.randint(0, CLASSES, (M, 2), generator=g),
                    extra_valid=torch.rand(M, 2, generator=g) < 0.5, grad_canaries=torch.randn(M, 2, P, generator=g),
                    grad_valid=torch.rand(M, 2, generator=g) < 0.5)
        dp = HeadRecipe(hidden, 1, 30, 0.5, dp=DPSettings(1.0, 1.0, 0.1, 8, 30.0))
        sgd = HeadRecipe(hidden, 2, 32, 0.1, momentum=0.9)
        outs = []
        for _ in range(2):
            for recipe, obs in ((dp, HeadsObserver(seed=1)), (sgd, None)):
                td = TrainData(X.to(device), y.to(device), n_models=M,
                               **{k: v.to(device) for k, v in data.items()})
                outs.append(train_heads(recipe, td, CLASSES, torch.Generator(device=device).manual_seed(5),
                                        observer=obs).flat().cpu())
        assert all(torch.isfinite(o).all() for o in outs)
        assert torch.equal(outs[0], outs[2]) and torch.equal(outs[1], outs[3])
    finally:
        torch.use_deterministic_algorithms(before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("hidden, extra", [((), 0), ((8,), 0), ((), 2)])
def test_cuda_graph_steps_replay_the_static_steps_bit_for_bit(hidden: tuple[int, ...], extra: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: on CUDA, DP-SGD runs as fixed-shape steps captured in CUDA graphs (``auto``, for runs of
    two graphs or more). Under the pipeline's deterministic kernels a graphed run equals the same
    static steps run eagerly bit for bit, draws what the eager path draws (the generator ends in the
    same state), and agrees with the eager gather formulation up to float rounding; ``auto`` takes the
    graph without a capture-failure warning. 2 graphs of 32 steps + 6 eager steps, include masks; with
    ``extra``, per-model extra rows (input canaries, as the black-box audit's trials have), some masked."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        X, y = _rows()
        g6 = torch.Generator().manual_seed(6)
        include = (torch.rand(M, N, generator=g6) < 0.8).cuda()
        kw = {} if not extra else {"X_extra": (4.0 + torch.randn(M, extra, X.shape[1], generator=g6)).cuda(),
                                   "y_extra": torch.randint(0, CLASSES, (M, extra), generator=g6).cuda(),
                                   "extra_valid": (torch.rand(M, extra, generator=g6) < 0.7).cuda()}
        recipe = HeadRecipe(hidden, 1, 30, 0.5, dp=DPSettings(0.8, 0.5, 0.1, 2 * STEPS_PER_GRAPH + 6, 30.0))
        runs = {}
        for f in ("graph", "static", "gather", "auto"):
            gen = torch.Generator(device="cuda").manual_seed(2)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                flat = train_heads(recipe, TrainData(X.cuda(), y.cuda(), n_models=M, include=include, **kw), CLASSES,
                                   gen, formulation=f).flat().cpu()
            assert not [w for w in caught if "CUDA graph" in str(w.message)], [str(w.message) for w in caught]
            runs[f] = (flat, gen.get_state())
    finally:
        torch.use_deterministic_algorithms(before)
    graph, static = runs["graph"][0], runs["static"][0]
    assert torch.isfinite(graph).all()
    assert torch.equal(graph, static), f"graph vs static steps: max |diff| {float((graph - static).abs().max())}"
    assert torch.equal(runs["auto"][0], graph)
    assert all(torch.equal(state, runs["gather"][1]) for _, state in runs.values())
    torch.testing.assert_close(graph, runs["gather"][0], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("hidden, momentum", [((), 0.0), ((8,), 0.9)])
def test_sgd_epochs_in_cuda_graphs_equal_the_eager_steps_bit_for_bit(hidden: tuple[int, ...], momentum: float,
                                                                     counted_captures: list[int]) -> None:
    """Issue 43: on CUDA, SGD epochs run as blocks of steps captured in CUDA graphs (``auto`` from two epochs,
    ``graph``; :class:`privaudit.train.cuda_graphs.EpochBlocks`). A replay runs the eager step's kernels, so
    under the pipeline's deterministic kernels the parameters equal the eager steps' (``gather``) bit for bit,
    the generator ends in the same state, and ``auto`` takes the graphs without a capture-failure warning.
    52 steps an epoch for the largest data set (256 rows in batches of 5: blocks of 32 and 20 steps, a last
    batch of one row; smaller data sets idle in the last steps), 3 epochs, include masks, per-model extra rows,
    momentum and weight decay."""
    from privaudit.train import cuda_graphs

    X, y = _rows()
    g = torch.Generator().manual_seed(6)
    include = (torch.rand(M, N, generator=g) < 0.8).cuda()
    X_extra, y_extra = torch.randn(M, 3, D, generator=g).cuda(), torch.randint(0, CLASSES, (M, 3), generator=g).cuda()
    recipe = HeadRecipe(hidden, 3, 5, 0.05, momentum=momentum, weight_decay=1e-3)
    runs = {}
    for f in ("graph", "auto", "gather"):
        gen = torch.Generator(device="cuda").manual_seed(2)
        data = TrainData(X.cuda(), y.cuda(), n_models=M, include=include, X_extra=X_extra, y_extra=y_extra)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            flat = train_heads(recipe, data, CLASSES, gen, formulation=f).flat().cpu()
        assert not [w for w in caught if "CUDA graph" in str(w.message)], [str(w.message) for w in caught]
        runs[f] = (flat, gen.get_state())
    graph, eager = runs["graph"][0], runs["gather"][0]
    assert torch.isfinite(graph).all()
    steps = -(-(int(include.sum(1).max()) + 3) // recipe.batch_size)
    assert len(counted_captures) == 2 * -(-steps // cuda_graphs.STEPS_PER_BLOCK)  # each block once, in "graph" and "auto"
    assert torch.equal(graph, eager), f"graph vs eager SGD steps: max |diff| {float((graph - eager).abs().max())}"
    assert torch.equal(runs["auto"][0], graph)
    assert all(torch.equal(state, runs["gather"][1]) for _, state in runs.values())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_the_fused_triton_steps_on_cuda_agree_with_the_eager_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43, opt-in ``formulation="triton"`` (the clipped sum of linear heads as one Triton kernel, in
    CUDA graphs): the eager path's draws, parameters up to float rounding, the same bits run to run."""
    from privaudit.train import fused_triton

    if (why := fused_triton.available()) is not None:
        pytest.skip(why)
    X, y = _rows()
    recipe = HeadRecipe((), 1, 30, 0.5, dp=DPSettings(0.8, 0.5, 0.1, 2 * STEPS_PER_GRAPH + 6, 30.0))
    runs = []
    for f in ("triton", "triton", "gather"):
        gen = torch.Generator(device="cuda").manual_seed(2)
        flat = train_heads(recipe, TrainData(X.cuda(), y.cuda(), n_models=M), CLASSES, gen, formulation=f).flat().cpu()
        runs.append((flat, gen.get_state()))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(state, runs[2][1]) for _, state in runs)
    torch.testing.assert_close(runs[0][0], runs[2][0], rtol=1e-4, atol=1e-5)


def test_chunks_are_cache_sized_only_on_the_cpu() -> None:
    """On the CPU a chunk's rows fit a 4 MiB working set; elsewhere (here the meta device, as a CUDA
    stand-in) chunks are bounded by the memory budget alone, so 1000 heads on 50 000 × 512 take one
    chunk instead of 44 (44× the kernel launches on a GPU)."""
    sizes = {}
    for device in ("cpu", "meta"):
        X = torch.empty(50_000, 512, device=device)
        data = TrainData(X, torch.zeros(50_000, dtype=torch.long, device=device), n_models=1000)
        heads = StackedHeads([torch.empty(1000, 10, 512, device=device)], [torch.empty(1000, 10, device=device)])
        sizes[device] = _Plan(data, heads, 1 << 30, "auto").chunk_models(84, False)
    assert sizes == {"cpu": 23, "meta": 1000}



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("hidden, momentum", [((), 0.0), ((16,), 0.9)])
def test_torch_mlp_fit_in_cuda_graphs_equals_the_eager_loop_bit_for_bit(hidden: list[int], momentum: float,
                                                                       counted_captures: list[int],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: ``kind: torch_mlp`` on CUDA runs its epochs as blocks of steps captured in CUDA graphs (autograd's
    backward and ``torch.optim.SGD``'s step inside; :func:`privaudit.defenders.torch_head.graphed_epochs_fit`). The
    model equals the eager loop's (``GRAPHED_EPOCHS = False``) bit for bit under deterministic kernels, blocks were
    captured, and no capture-failure warning was given. 300 rows in batches of 7 (43 steps: blocks of 32 and 11,
    a last batch of 6 rows), 3 epochs."""
    from privaudit.defenders import torch_head
    from privaudit.defenders.registry import make_defender, validate_defender_spec

    X, y = (t.numpy() for t in _rows())
    spec = validate_defender_spec({"name": "m", "kind": "torch_mlp", "hidden": list(hidden), "epochs": 3,
                                   "batch_size": 7, "momentum": momentum, "weight_decay": 1e-3}, where="defenders[0]")
    models = {}
    for graphed in (True, False):
        monkeypatch.setattr(torch_head, "GRAPHED_EPOCHS", graphed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = make_defender(spec, CLASSES, device="cuda").fit(X, y, seed=4)
        assert not [w for w in caught if "CUDA graph" in str(w.message)], [str(w.message) for w in caught]
        models[graphed] = {k: v.cpu() for k, v in model.net.state_dict().items()}
    assert len(counted_captures) == 2  # blocks 1 and 0 of 43 steps in blocks of 32, each once
    for k, v in models[False].items():
        assert torch.equal(models[True][k], v), f"{k}: graphed vs eager max |diff| {float((models[True][k] - v).abs().max())}"
