"""The fused DP-SGD kernel for linear heads (``privaudit.train.native``, ``linear_dp.c``).

Golden: one clipped step equals opacus's ``DPOptimizer`` (σ = 0). Property: whole DP-SGD runs equal
the torch formulations up to float rounding over random shapes (d not a multiple of 8, include masks,
extra rows, gradient canaries, empty batches, q = 1). Reproducibility: bit-identical for any thread
count and for builds of other SIMD widths. Failure paths: no compiler, turned off, bad labels.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from sklearn.datasets import load_digits
from torch import nn

from privaudit.train import DPSettings, HeadRecipe, TrainData, init_heads, train_heads
from privaudit.train import native
from privaudit.train.batched import poisson_batches


def _step_inputs(M: int, n: int, d: int, C: int, q: float, seed: int):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g) * 2
    y = torch.randint(0, C, (n,), generator=g)
    flat = init_heads(M, d, (), C, g, "cpu").flat()
    idx, take, counts = poisson_batches(None, torch.full((M,), n), q, g)
    return X, y, X.square().sum(1), idx, take, counts, flat


def test_one_clipped_step_equals_opacus_dpoptimizer(kernel) -> None:
    """Golden: the kernel's Σ clip(g_i)/B over a batch equals opacus's update with σ = 0, lr = 1."""
    X, y = load_digits(return_X_y=True)
    X, y = torch.tensor(X[:40] / 16.0, dtype=torch.float32), torch.tensor(y[:40])
    b, C, M = 40, 0.3, 3
    heads = init_heads(M, 64, (), 10, torch.Generator().manual_seed(2), "cpu")
    flat, out = heads.flat(), torch.empty(M, 650)
    idx = torch.arange(b).expand(M, b).contiguous()
    kernel.clipped_sum(X, y, X.square().sum(1), None, None, None, idx, torch.full((M,), b), flat, out, C, float(b))
    for m in range(M):
        net = nn.Linear(64, 10)
        with torch.no_grad():
            net.weight.copy_(heads.weights[0][m])
            net.bias.copy_(heads.biases[0][m])
        gsm = GradSampleModule(net, loss_reduction="mean")
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=1.0), noise_multiplier=0.0, max_grad_norm=C,
                          expected_batch_size=b, loss_reduction="mean")
        nn.CrossEntropyLoss()(gsm(X), y).backward()
        opt.step()
        ref = torch.cat([(heads.weights[0][m] - net.weight.detach()).reshape(-1),
                         heads.biases[0][m] - net.bias.detach()])
        torch.testing.assert_close(out[m], ref, rtol=1e-4, atol=1e-6)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.sampled_from([1, 7, 8, 13, 40]), classes=st.integers(2, 12),
       q=st.sampled_from([1e-4, 0.05, 0.3, 1.0]), masks=st.booleans(), extras=st.booleans(), grads=st.booleans())
def test_dp_sgd_runs_equal_the_torch_formulation(kernel, seed, d, classes, q, masks, extras, grads) -> None:
    """Property: ``formulation="native"`` trains the same heads as ``"gather"`` (same draws, float rounding only)."""
    g = torch.Generator().manual_seed(seed)
    M, n = 9, 60
    kw: dict = {}
    if masks:
        kw["include"] = torch.rand(M, n, generator=g) < 0.6
    if extras:
        kw |= {"X_extra": torch.randn(M, 3, d, generator=g) * 3,
               "y_extra": torch.randint(0, classes, (M, 3), generator=g),
               "extra_valid": torch.rand(M, 3, generator=g) < 0.5}
    if grads:
        kw |= {"grad_canaries": torch.randn(M, 2, d * classes + classes, generator=g),
               "grad_valid": torch.rand(M, 2, generator=g) < 0.5}
    X, y = torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)
    recipe = HeadRecipe((), 1, 10, 0.5, dp=DPSettings(0.7, 0.8, q, 5, max(1.0, q * n)))
    out = {f: train_heads(recipe, TrainData(X, y, n_models=M, **kw), classes, torch.Generator().manual_seed(seed),
                          formulation=f).flat() for f in ("gather", "native")}
    assert torch.isfinite(out["native"]).all()
    torch.testing.assert_close(out["native"], out["gather"], rtol=1e-5, atol=2e-6)


def test_auto_uses_the_kernel_for_linear_dp_heads_on_the_cpu(kernel) -> None:
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(200, 16, generator=g), torch.randint(0, 3, (200,), generator=g)
    recipe = HeadRecipe((), 1, 20, 0.5, dp=DPSettings(1.0, 1.0, 0.1, 4, 20.0))
    run = {f: train_heads(recipe, TrainData(X, y, n_models=5), 3, torch.Generator().manual_seed(1),
                          formulation=f).flat() for f in ("auto", "native", "gather")}
    assert torch.equal(run["auto"], run["native"])
    assert not torch.equal(run["native"], run["gather"])  # a different summation order: the kernel did run


def test_bit_identical_for_any_thread_count(kernel) -> None:
    X, y, xsq, idx, _, counts, flat = _step_inputs(37, 500, 29, 10, 0.1, seed=3)
    outs = []
    for threads in (1, 2, 3, 8):
        out = torch.full_like(flat, float("nan"))
        kernel.clipped_sum(X, y, xsq, None, None, None, idx, counts, flat, out, 1.0, 50.0, threads)
        outs.append(out)
    assert torch.isfinite(outs[0]).all()
    assert all(torch.equal(outs[0], o) for o in outs[1:])


def _has(flag: str) -> bool:
    return flag in (native._cpu_flags() or set())


_BUILDS = [
    pytest.param("generic", None, id="generic-sse2"),
    pytest.param("avx2", None, id="avx2-8-lanes",
                 marks=pytest.mark.skipif(not _has("avx2"), reason="this CPU has no AVX2")),
    # the 16-lane code (class pairs, 16-wide update) compiled for AVX2: its logic, checkable on any AVX2 CPU
    pytest.param("avx2", ["-mavx2", "-DPA_VW=16"], id="avx2-16-lanes",
                 marks=pytest.mark.skipif(not _has("avx2"), reason="this CPU has no AVX2")),
    pytest.param("avx512", None, id="avx512-16-lanes",
                 marks=pytest.mark.skipif(not _has("avx512f"), reason="this CPU has no AVX-512F")),
]


@pytest.mark.parametrize(("isa", "flags"), _BUILDS)
def test_bit_identical_across_simd_widths(kernel, tmp_path, monkeypatch, isa, flags) -> None:
    """Builds of every vector width (SSE2, AVX2 with 8 or 16 lanes, AVX-512 with 16) give the same bits
    as the build in use, over shapes that exercise every tail (d not a multiple of 8 or 16, odd class
    counts: a class pair with one class), and the same Gaussian noise: the order of operations is fixed by
    the code, not by the compiler's vectoriser or the vector width."""
    monkeypatch.setenv("PRIVAUDIT_NATIVE_CACHE", str(tmp_path))
    if flags is not None:
        monkeypatch.setattr(native, "_arch_flags", lambda _isa=None: list(flags))
    other = native.load_kernel(isa)
    assert other.path != kernel.path
    for M, n, d, C, q, seed in [(11, 400, 45, 10, 0.2, 4), (7, 300, 8, 3, 0.3, 1), (5, 200, 1, 2, 0.5, 2),
                                (9, 333, 37, 7, 0.1, 3), (4, 64, 520, 11, 0.4, 6), (6, 90, 16, 1, 1.0, 7)]:
        X, y, xsq, idx, _, counts, flat = _step_inputs(M, n, d, C, q, seed=seed)
        ref = torch.full_like(flat, float("nan"))
        kernel.clipped_sum(X, y, xsq, None, None, None, idx, counts, flat, ref, 1.0, 80.0, 2)
        out = torch.full_like(flat, float("nan"))
        other.clipped_sum(X, y, xsq, None, None, None, idx, counts, flat, out, 1.0, 80.0, 2)
        assert torch.isfinite(ref).all()
        assert torch.equal(out, ref), (M, n, d, C)
    for M, P, seed in [(3, 650, 11), (5, 37, 2**63 + 5), (1, 16, 0), (2, 1, 9)]:  # the noise (gaussian_noise.c)
        ref, out = torch.full((M, P), float("nan")), torch.full((M, P), float("nan"))
        kernel.gaussian_fill(seed, ref, 0.37, 2)
        other.gaussian_fill(seed, out, 0.37, 2)
        assert torch.isfinite(ref).all()
        assert torch.equal(out, ref), (M, P)


def test_the_build_follows_the_cpu_and_privaudit_native_isa(monkeypatch) -> None:
    """``auto`` takes AVX-512 where the CPU has AVX-512F, AVX2 where it has AVX2; the variable overrides
    it, and a bad value is refused with the accepted ones."""
    monkeypatch.setattr(native.platform, "machine", lambda: "x86_64")
    monkeypatch.delenv("PRIVAUDIT_NATIVE_ISA", raising=False)
    for flags, want in (({"avx2", "avx512f"}, "avx512"), ({"avx2"}, "avx2"), ({"sse2"}, "generic")):
        monkeypatch.setattr(native, "_cpu_flags", lambda flags=flags: flags)
        assert native._isa() == want
    assert native._arch_flags("avx512") == ["-mavx512f", "-DPA_VW=16"] and native._arch_flags("avx2") == ["-mavx2"]
    monkeypatch.setenv("PRIVAUDIT_NATIVE_ISA", "avx2")
    assert native._isa() == "avx2"
    monkeypatch.setenv("PRIVAUDIT_NATIVE_ISA", "avx1024")
    with pytest.raises(ValueError, match="PRIVAUDIT_NATIVE_ISA='avx1024'.*avx512, avx2, generic"):
        native._isa()


def test_labels_outside_the_classes_are_refused(kernel) -> None:
    X, y, xsq, idx, _, counts, flat = _step_inputs(4, 50, 8, 10, 0.5, seed=5)
    y = y.clone()
    y[idx[0, 0]] = 10
    with pytest.raises(ValueError, match="label outside"):
        kernel.clipped_sum(X, y, xsq, None, None, None, idx, counts, flat, torch.empty_like(flat), 1.0, 25.0)


def test_wrong_dtypes_are_refused_before_the_call(kernel) -> None:
    X, y, xsq, idx, _, counts, flat = _step_inputs(4, 50, 8, 10, 0.5, seed=5)
    with pytest.raises(ValueError, match="y must be a contiguous torch.int64"):
        kernel.clipped_sum(X, y.int(), xsq, None, None, None, idx, counts, flat, torch.empty_like(flat), 1.0, 25.0)


def test_without_a_compiler_the_torch_path_runs_and_native_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PRIVAUDIT_NATIVE_CACHE", str(tmp_path))
    native._reset()
    try:
        with pytest.warns(RuntimeWarning, match="using the torch path"):
            assert native.linear_dp_kernel() is None
        assert "no C compiler" in (native.unavailable_reason() or "")
        g = torch.Generator().manual_seed(0)
        X, y = torch.randn(100, 6, generator=g), torch.randint(0, 3, (100,), generator=g)
        recipe = HeadRecipe((), 1, 10, 0.5, dp=DPSettings(1.0, 1.0, 0.1, 3, 10.0))
        auto = train_heads(recipe, TrainData(X, y, n_models=3), 3, torch.Generator().manual_seed(1)).flat()
        gather = train_heads(recipe, TrainData(X, y, n_models=3), 3, torch.Generator().manual_seed(1),
                             formulation="gather").flat()
        assert torch.equal(auto, gather)
        with pytest.raises(ValueError, match="native kernel is unavailable"):
            train_heads(recipe, TrainData(X, y, n_models=3), 3, torch.Generator().manual_seed(1), formulation="native")
    finally:
        native._reset()


@pytest.mark.parametrize("case", ["compiler fails", "cache not writable"])
def test_a_failed_build_warns_and_falls_back(case, monkeypatch, tmp_path) -> None:
    """A compiler that exits non-zero, or a cache path that cannot be a folder, is reported (with the
    compiler's own message) and leaves the torch path, never a half-written library in the cache."""
    if case == "compiler fails":
        monkeypatch.setenv("CC", "false")
        monkeypatch.setenv("PRIVAUDIT_NATIVE_CACHE", str(tmp_path))
    else:
        (tmp_path / "file").write_text("not a folder")
        monkeypatch.setenv("PRIVAUDIT_NATIVE_CACHE", str(tmp_path / "file"))
    native._reset()
    try:
        with pytest.warns(RuntimeWarning, match="could not be built"):
            assert native.linear_dp_kernel() is None
        assert native.unavailable_reason()
        assert not list(tmp_path.rglob("*.so"))
    finally:
        native._reset()


def test_privaudit_native_0_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("PRIVAUDIT_NATIVE", "0")
    native._reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # turning it off on purpose is not warned about
            assert native.linear_dp_kernel() is None
        assert "PRIVAUDIT_NATIVE=0" in (native.unavailable_reason() or "")
    finally:
        native._reset()


@pytest.mark.parametrize("recipe", [HeadRecipe((4,), 1, 10, 0.5, dp=DPSettings(1.0, 1.0, 0.1, 2, 10.0)),
                                    HeadRecipe((), 1, 10, 0.5)], ids=["mlp", "sgd"])
def test_native_formulation_is_only_for_linear_dp_heads(recipe) -> None:
    X, y = torch.randn(30, 5), torch.randint(0, 3, (30,))
    with pytest.raises(ValueError, match="linear heads"):
        train_heads(recipe, TrainData(X, y, n_models=2), 3, torch.Generator().manual_seed(0), formulation="native")


def test_accuracy_of_native_heads_matches_the_torch_path_on_digits(kernel) -> None:
    """Simulation: 64 DP-SGD heads on digits (σ = 1) reach the same test accuracy either way (± 1 %)."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    Xt, yt = torch.tensor(X[:1200]), torch.tensor(y[:1200])
    Xe, ye = torch.tensor(X[1200:]), torch.tensor(y[1200:])
    recipe = HeadRecipe((), 1, 60, 0.5, dp=DPSettings(1.0, 1.0, 0.05, 200, 60.0))
    acc = {}
    for f in ("native", "gather"):
        h = train_heads(recipe, TrainData(Xt, yt, n_models=64), 10, torch.Generator().manual_seed(2), formulation=f)
        logits = torch.baddbmm(h.biases[0].unsqueeze(1), Xe.expand(64, -1, -1), h.weights[0].transpose(1, 2))
        acc[f] = float((logits.argmax(2) == ye).double().mean())
    assert acc["native"] > 0.85
    assert abs(acc["native"] - acc["gather"]) < 0.01


def test_an_upgraded_compiler_gets_a_fresh_build(monkeypatch, tmp_path) -> None:
    """Issue 28 item 1: the build cache is keyed on the compiler's ``--version`` too, not only its command."""
    import shutil

    real = shutil.which("cc") or shutil.which("gcc")
    if real is None:
        pytest.skip("no C compiler on this machine")
    wrapper = tmp_path / "bin" / "mycc"
    wrapper.parent.mkdir()
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("PRIVAUDIT_NATIVE_CACHE", str(tmp_path / "cache"))
    builds = []
    for version in ("mycc 1.0", "mycc 1.0", "mycc 2.0"):
        wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{version}"; exit 0; fi\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
        native._reset()
        try:
            kernel = native.linear_dp_kernel()
            assert kernel is not None, native.unavailable_reason()
            builds.append(kernel.path)
        finally:
            native._reset()
    assert builds[0] == builds[1] and builds[2] != builds[0]
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 2
