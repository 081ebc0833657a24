"""The per-sample risk's bootstrap, computed in blocks of rows for all resamples at once, gives the numbers of one
fit per resample (the computation before, :mod:`privaudit.testing.scoring_reference`) bit for bit: saturated samples (φ at the
clip, the censored-variance rule), samples with fewer than two IN or OUT models in a resample, any block size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privaudit.attacks.sample_risk as sample_risk
from privaudit.attacks.sample_risk import PHI_MAX, RiskOptions, _bootstrap, _fit
from privaudit.testing.scoring_reference import risk_bootstrap_per_resample
from tests.import_graph import ROOT


def _inputs(n: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    inside = rng.random((n, K)) < 0.5
    phi = rng.normal(0.5, 1.5, (n, K)) + 0.8 * inside
    phi[: n // 10] = np.where(rng.random((n // 10, K)) < 0.7, PHI_MAX, phi[: n // 10])  # saturated rows
    phi[n // 10: n // 5] = -PHI_MAX
    inside[n // 5: n // 5 + 5] = True  # no OUT model at all
    inside[n // 5 + 5: n // 5 + 10, 1:] = False  # one IN model at most
    phi_t = rng.normal(0.7, 1.5, n)
    return phi_t, phi, inside


@pytest.mark.parametrize(("n", "K", "block"), [(300, 8, 1024), (257, 32, 100), (50, 4, 7), (120, 6, 1)])
def test_blocked_bootstrap_equals_one_fit_per_resample(monkeypatch: pytest.MonkeyPatch, n: int, K: int,
                                                      block: int) -> None:
    monkeypatch.setattr(sample_risk, "BOOTSTRAP_ROWS", block)
    phi_t, phi, inside = _inputs(n, K, seed=K)
    _, priors = _fit(phi, inside)
    options = RiskOptions(reference_models=max(4, K), bootstrap=40)
    want = risk_bootstrap_per_resample(phi_t, phi, inside, priors, options, np.random.default_rng(5))
    got = _bootstrap(phi_t, phi, inside, priors, options, np.random.default_rng(5))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert np.isnan(got[0]).any() and np.isfinite(got[0]).sum() > n // 2  # both kinds of sample were there


def test_the_bootstrap_leaves_the_generator_where_the_per_resample_fits_did() -> None:
    """The risk's later randomness is unchanged: the same draws, in the same order."""
    phi_t, phi, inside = _inputs(60, 8, seed=1)
    _, priors = _fit(phi, inside)
    options = RiskOptions(reference_models=8, bootstrap=25)
    before, after = np.random.default_rng(9), np.random.default_rng(9)
    risk_bootstrap_per_resample(phi_t, phi, inside, priors, options, before)
    _bootstrap(phi_t, phi, inside, priors, options, after)
    assert before.integers(2**62) == after.integers(2**62)


def test_the_scoring_benchmark_runs_and_checks_its_arms_agree(tmp_path: Path) -> None:
    """``benchmarks/bench_ltu_scoring.py`` at a tiny size: both arms run, agree bit for bit, and it writes its summary."""
    out = tmp_path / "ltu_scoring.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "benchmarks/bench_ltu_scoring.py", "--n", "150", "--rounds", "40",
                           "--pairs", "1", "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "offline RMIA guess, 150 + 150 rows, 40 rounds" in text and "per-sample risk bootstrap, 300 samples" in text
    assert text.count("same bits in every pair") == 2
