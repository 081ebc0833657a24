"""The batched trainer's formulations (per-model gathered rows, rows shared by a chunk) agree, and the
memory budget only changes how the work is chunked, never the random draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from privaudit.train import DPSettings, HeadRecipe, TrainData, initial_heads, train_heads

ROOT = Path(__file__).resolve().parents[2]


def _data(M: int, n: int = 300, d: int = 12, extras: bool = True, grads: int = 0, include: bool = True,
          seed: int = 0) -> TrainData:
    g = torch.Generator().manual_seed(seed)
    X, y = torch.randn(n, d, generator=g), torch.randint(0, 4, (n,), generator=g)
    kw: dict = {}
    if include:
        kw["include"] = torch.rand(M, n, generator=g) < 0.7
    if extras:
        kw |= {"X_extra": torch.randn(M, 3, d, generator=g), "y_extra": torch.randint(0, 4, (M, 3), generator=g),
               "extra_valid": torch.rand(M, 3, generator=g) < 0.5}
    data = TrainData(X, y, n_models=M, **kw)
    if grads:
        data.grad_canaries = torch.randn(M, 2, grads, generator=g)
        data.grad_valid = torch.rand(M, 2, generator=g) < 0.5
    return data


def _n_params(d: int, hidden: tuple[int, ...], c: int = 4) -> int:
    widths = [d, *hidden, c]
    return sum(i * o + o for i, o in zip(widths[:-1], widths[1:]))


CASES = {
    "dp-linear-q0.5": (HeadRecipe((), 1, 150, 0.3, dp=DPSettings(1.0, 1.0, 0.5, 6, 150.0)), {}),
    "dp-mlp-q0.1-all": (HeadRecipe((5,), 1, 30, 0.3, dp=DPSettings(1.0, 1.0, 0.1, 6, 30.0)), {"grads": True}),
    "sgd-mlp-momentum-include": (HeadRecipe((5,), 2, 40, 0.1, momentum=0.9, weight_decay=1e-3), {"grads": True}),
    "sgd-same-order": (HeadRecipe((6,), 2, 50, 0.1, shuffle=False, momentum=0.5),
                       {"extras": False, "include": False}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_formulations_agree_to_rounding(case: str) -> None:
    recipe, kw = CASES[case]
    out = {}
    for form in ("auto", "gather", "shared"):
        data = _data(10, grads=_n_params(12, recipe.hidden) if kw.get("grads") else 0,
                     extras=kw.get("extras", True), include=kw.get("include", True))
        out[form] = train_heads(recipe, data, 4, torch.Generator().manual_seed(3), formulation=form).flat()
        assert torch.isfinite(out[form]).all()
    torch.testing.assert_close(out["gather"], out["shared"], rtol=0, atol=1e-5)
    torch.testing.assert_close(out["gather"], out["auto"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_steps_without_host_reads_give_the_same_bits(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the SGD step always applies the active-model mask (no ``active.all()`` read per step) and the extra
    rows are taken by a mask (no ``nonzero``); run here on the CPU, both must give the bits of the host-reading
    path, with and without inactive models in a step."""
    import privaudit.train.batched as batched

    recipe, kw = CASES[case]
    out = []
    for no_reads in (False, True):
        monkeypatch.setattr(batched, "_without_host_reads", lambda _device, v=no_reads: v)
        for n in (300, 37):  # 37 rows: models run out of rows at different steps (inactive models in a step)
            data = _data(10, n=n, grads=_n_params(12, recipe.hidden) if kw.get("grads") else 0,
                         extras=kw.get("extras", True), include=kw.get("include", True))
            out.append(train_heads(recipe, data, 4, torch.Generator().manual_seed(3)).flat())
    assert torch.equal(out[0], out[2]) and torch.equal(out[1], out[3])


@pytest.mark.parametrize("case", sorted(CASES))
def test_memory_budget_changes_chunking_not_draws(case: str) -> None:
    """A 1 MiB budget draws the (M, N) uniforms in blocks of a few models and computes in chunks of
    one or two: the same random stream, so the same training up to float rounding."""
    recipe, kw = CASES[case]
    out = []
    for budget in (1 << 30, 1 << 20):
        data = _data(40, n=2000, grads=_n_params(12, recipe.hidden) if kw.get("grads") else 0,
                     extras=kw.get("extras", True), include=kw.get("include", True))
        out.append(train_heads(recipe, data, 4, torch.Generator().manual_seed(3), memory_budget=budget).flat())
    torch.testing.assert_close(out[0], out[1], rtol=0, atol=1e-5)


def test_chunks_with_empty_batches_get_a_zero_clipped_sum() -> None:
    """The step's gradient buffer is reused and only chunks with rows are written: a chunk whose
    models all drew empty batches (frequent here: 0.15 expected rows per model and step, two wide
    models per chunk under a 1 MiB budget) must get a zero clipped sum, not the previous step's."""
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(300, 2000, generator=g), torch.randint(0, 4, (300,), generator=g)
    recipe = HeadRecipe((), 1, 1, 0.5, dp=DPSettings(1.0, 1.0, 0.0005, 30, 1.0))
    out = [train_heads(recipe, TrainData(X, y, n_models=16), 4, torch.Generator().manual_seed(3),
                       memory_budget=budget).flat() for budget in (1 << 30, 1 << 20)]
    torch.testing.assert_close(out[0], out[1], rtol=0, atol=1e-5)


def test_steps_where_every_batch_is_empty_leave_noiseless_heads_unchanged() -> None:
    """σ = 0 and q so small that every batch is empty: the clipped sum is zero at every step (the
    reused gradient buffer holds nothing stale or uninitialised), so θ_T = θ_0."""
    from privaudit.train import initial_heads

    recipe = HeadRecipe((3,), 1, 1, 0.5, dp=DPSettings(0.0, 1.0, 1e-9, 5, 1.0))
    data = _data(6, extras=False, include=False)
    theta0 = initial_heads(recipe, data, 4, torch.Generator().manual_seed(3)).flat()
    assert torch.equal(train_heads(recipe, data, 4, torch.Generator().manual_seed(3)).flat(), theta0)


def test_unknown_formulation_is_refused() -> None:
    with pytest.raises(ValueError, match="formulation"):
        train_heads(CASES["dp-linear-q0.5"][0], _data(2), 4, torch.Generator().manual_seed(0), formulation="dense")


@pytest.mark.slow
def test_many_heads_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "many_heads.txt"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_many_heads.py"), "--quick",
                          "--rows", "linear-dp-16,mlp-sgd-16", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, check=True)
    text = out.read_text()
    assert "fp32 matmul peak" in text and "linear-dp-16" in text and "mlp-sgd-16" in text, res.stdout
    assert "% of peak" in text
