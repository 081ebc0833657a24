"""DP-SGD's Gaussian noise on the CPU (``gaussian_noise.c`` via ``privaudit.train.noise``).

Golden: xoshiro256++'s published first output, and the C numbers against an independent float64
re-implementation (numpy) of the same streams and transform. Distribution (simulation with known
truth): Kolmogorov-Smirnov, moments, tails, and no correlation within a pair, between models or
between neighbours. Properties (hypothesis): a model's row depends only on (seed, model), whatever
M, P or the thread count. The trainer: the native path is used on the CPU, the torch path otherwise,
and ``PRIVAUDIT_NATIVE=0`` gives exactly ``torch.randn``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privaudit.train import native
from privaudit.train.noise import draw_noise, draw_standard_noise

MASK = (1 << 64) - 1


def _splitmix(x: int) -> tuple[int, int]:
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return x, z ^ (z >> 31)


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK


def _xoshiro(s: list[int]) -> int:
    out = (_rotl((s[0] + s[3]) & MASK, 23) + s[0]) & MASK
    t = (s[1] << 17) & MASK
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return out


def _reference_row(seed: int, m: int, P: int) -> np.ndarray:
    """Model m's P normals in float64, from the stream and transform the C file's docstring describes."""
    x = seed ^ _splitmix(m)[1]
    s = []
    for _ in range(4):
        x, v = _splitmix(x)
        s.append(v)
    out: list[float] = []
    while len(out) < P:
        w = np.array([_xoshiro(s) for _ in range(8)], dtype=np.uint64)
        halves = w.view(np.uint32)  # little-endian: word i's low half, then its high half
        a, b = halves[:8].astype(np.float64), halves[8:].astype(np.int64)
        u1 = np.floor(a / 2) * 2.0**-31 + 2.0**-32
        r = np.sqrt(-2.0 * np.log(u1))
        theta = (b >> 30) * (np.pi / 2) + ((b & 0x1FFFFFFF) * 2.0**-29 - 0.5) * (np.pi / 2)
        out += list(r * np.cos(theta)) + list(r * np.sin(theta))
    return np.array(out[:P])


def test_xoshiro256pp_first_output_is_the_published_one() -> None:
    """Golden: from the state (1, 2, 3, 4) xoshiro256++ first returns rotl(1 + 4, 23) + 1 = 41943041
    (Blackman & Vigna's reference code); checks the reference the next test compares the C code with."""
    assert _xoshiro([1, 2, 3, 4]) == 41943041


@pytest.mark.parametrize(("seed", "M", "P"), [(0, 2, 40), (12345, 3, 33), (2**63 - 1, 1, 16), (7, 4, 5)])
def test_the_c_numbers_are_the_documented_streams_and_transform(kernel, seed, M, P) -> None:
    """Golden: every value equals the float64 re-implementation up to float32 rounding and the ~1 ulp
    polynomials (ln, sin, cos); a wrong bit, quadrant or sign would be off by O(1)."""
    out = torch.empty(M, P)
    kernel.gaussian_fill(seed, out, 1.0, 1)
    for m in range(M):
        ref = _reference_row(seed, m, P)
        np.testing.assert_allclose(out[m].numpy(), ref, rtol=2e-6, atol=2e-6)


def test_the_draws_are_standard_normal(kernel) -> None:
    """Simulation: 4 million draws (seeded, so the outcome is fixed) pass Kolmogorov-Smirnov, have the
    normal's moments and tails within a few standard errors, and reach past 5 sigma (torch's float32 CPU
    sampler cannot give |z| above ~5.8; this one up to 6.66)."""
    out = torch.empty(1000, 4000)
    kernel.gaussian_fill(2024, out, 1.0, 2)
    z = out.numpy().astype(np.float64).ravel()
    n = z.size
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)
    assert abs(stats.skew(z)) < 4 * np.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 4 * np.sqrt(24 / n)
    for k in (2.0, 3.0, 4.0):
        p = 2 * stats.norm.sf(k)
        assert abs(np.mean(np.abs(z) > k) - p) < 5 * np.sqrt(p * (1 - p) / n), k
    assert np.abs(z).max() > 5.0


def test_no_correlation_within_pairs_models_or_neighbours(kernel) -> None:
    """The pair (z0, z1) of one word, two models' rows, and neighbouring values are uncorrelated
    (|r| < 5/sqrt(n)); the squares too (a dependence correlation of values alone could miss)."""
    out = torch.empty(2000, 512)
    kernel.gaussian_fill(99, out, 1.0, 2)
    z = out.numpy().astype(np.float64)
    pairs = (z[:, 0:8].ravel(), z[:, 8:16].ravel())  # z0 and z1 of the same eight words
    models = (z[0::2].ravel(), z[1::2].ravel())
    neighbours = (z[:, :-1].ravel(), z[:, 1:].ravel())
    for a, b in (pairs, models, neighbours):
        bound = 5 / np.sqrt(a.size)
        assert abs(np.corrcoef(a, b)[0, 1]) < bound
        assert abs(np.corrcoef(a * a, b * b)[0, 1]) < bound


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), M=st.integers(1, 9), P=st.integers(1, 70), threads=st.integers(1, 4),
       scale=st.floats(0.01, 100.0))
def test_a_row_depends_only_on_seed_and_model(kernel, seed, M, P, threads, scale) -> None:
    """Property: row m of an (M, P) call is the first P values of row m of any larger call, for any
    thread count; ``scale`` multiplies exactly (one float32 rounding); another seed differs."""
    small = torch.empty(M, P)
    kernel.gaussian_fill(seed, small, scale, threads)
    big = torch.empty(M + 3, P + 17)
    kernel.gaussian_fill(seed, big, 1.0, 1)
    assert torch.equal(small, big[:M, :P] * np.float32(scale))
    other = torch.empty(M, P)
    kernel.gaussian_fill(seed ^ 1, other, scale, threads)
    assert not torch.equal(small, other)


def test_bad_arguments_are_refused(kernel) -> None:
    with pytest.raises(ValueError, match="seed must lie in"):
        kernel.gaussian_fill(-1, torch.empty(2, 3), 1.0)
    with pytest.raises(ValueError, match="float32 CPU tensor"):
        kernel.gaussian_fill(0, torch.empty(2, 3, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="float32 CPU tensor"):
        kernel.gaussian_fill(0, torch.empty(3, 2).t(), 1.0)


def test_draw_noise_uses_the_library_on_the_cpu_and_one_seed_per_step(kernel) -> None:
    """The trainer's noise: one 63-bit seed from the generator, then the library's streams."""
    gen = torch.Generator().manual_seed(5)
    out = draw_noise(torch.empty(4, 30), gen, 0.5)
    seed = int(torch.randint(2**63 - 1, (), generator=torch.Generator().manual_seed(5)))
    want = torch.empty(4, 30)
    kernel.gaussian_fill(seed, want, 0.5, 1)
    assert torch.equal(out, want)
    after = torch.Generator().manual_seed(5)
    torch.randint(2**63 - 1, (), generator=after)
    assert torch.equal(gen.get_state(), after.get_state())


def test_without_the_library_draw_noise_is_torch_randn(monkeypatch) -> None:
    """``PRIVAUDIT_NATIVE=0`` (or no compiler): exactly ``torch.randn(...).mul_(scale)``, as before."""
    monkeypatch.setenv("PRIVAUDIT_NATIVE", "0")
    native._reset()
    try:
        out = draw_noise(torch.empty(3, 21), torch.Generator().manual_seed(8), 2.5)
        want = torch.randn(3, 21, generator=torch.Generator().manual_seed(8)).mul_(2.5)
        assert torch.equal(out, want)
    finally:
        native._reset()


@pytest.mark.parametrize("native_on", [True, False])
def test_standard_noise_scaled_in_float32_is_draw_noise(monkeypatch, native_on) -> None:
    """``draw_standard_noise`` draws what ``draw_noise`` scales, from the same generator draws: multiplied by the
    scale in float32 (as the fused Triton update does) it gives ``draw_noise``'s bits, with the library and
    without (the interpreter test of ``formulation="triton"`` on the CPU compared other draws before)."""
    if not native_on:
        monkeypatch.setenv("PRIVAUDIT_NATIVE", "0")
    native._reset()
    try:
        for scale in (0.7 / 3.0, 2.5, 1e-3):
            g1, g2 = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
            want = draw_noise(torch.empty(5, 37), g1, scale)
            z = draw_standard_noise(torch.empty(5, 37), g2)
            assert torch.equal(z * torch.tensor(scale, dtype=torch.float32), want)
            assert torch.equal(g1.get_state(), g2.get_state())
            assert not torch.equal(z, want)
    finally:
        native._reset()
