"""The LTU scoring's loops as written before they were vectorised: the references that the tests compare the
library with bit for bit and that ``benchmarks/bench_ltu_scoring.py`` times it against.

- :func:`rmia_guess_per_round`: offline RMIA with one LR pass and one sort of the population per round (the
  library groups rounds by their usable reference models and counts: :mod:`privaudit.attacks.mia_rmia`);
- :func:`risk_bootstrap_per_resample`: the per-sample risk's bootstrap with one whole fit per resample (the library
  computes all resamples in blocks of rows: :func:`privaudit.attacks.sample_risk._bootstrap`);
- :func:`torch_grad_norms_vmap`: the gradient attacker's per-sample gradient norms of a torch head as ``torch.func``'s
  vmap of grad (every per-sample gradient materialised, float32; the library uses the linear-layer identity in
  float64: :func:`privaudit.attacks.ltu_gradient._torch_grad_norms`). Not bit-identical: compared within rounding.
"""

from __future__ import annotations

import warnings

import numpy as np

from privaudit.attacks.ltu import RoundBatch
from privaudit.attacks.ltu_scores import pairwise_guess
from privaudit.attacks.mia_rmia import RmiaAttacker, offline_pr_x, rmia_scores
from privaudit.attacks.sample_risk import RiskOptions, _fit, _llr
from privaudit.stats.percentiles import nanpercentile_columns

__all__ = ["risk_bootstrap_per_resample", "rmia_guess_per_round", "torch_grad_norms_vmap"]


def rmia_guess_per_round(attacker: RmiaAttacker, batch: RoundBatch) -> np.ndarray:
    """``attacker.guess(batch)`` as computed before: each round's candidates and population, their LR from a NaN
    array's ``nanmean``, and a sort of the population."""
    t = batch.table
    pool = batch.reference_pool(attacker.count, attacker.fraction, attacker.n_jobs, attacker.device)
    conf_t = t.proba[np.arange(t.n), t.y]

    def lr(target: np.ndarray, ref: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(ref, axis=-1) if ref.shape[-1] else np.full(ref.shape[:-1], np.nan)
        return target / offline_pr_x(mean, attacker.a)

    out = np.empty((len(batch), 2))
    with np.errstate(all="ignore"):
        for k in range(len(batch)):
            cand = np.array([batch.u1[k], batch.u2[k]])
            pop = batch.labelled_rows(k, "reserved")
            lr_c = lr(conf_t[cand], pool.conf_round(k, cand))
            lr_z = lr(conf_t[pop], pool.conf_round(k, pop))
            out[k] = rmia_scores(lr_c, lr_z, attacker.gamma)
    return pairwise_guess(out[:, 0], out[:, 1])


def risk_bootstrap_per_resample(phi_t: np.ndarray, phi: np.ndarray, inside: np.ndarray,
                                priors: tuple[tuple[float, float], tuple[float, float]], options: RiskOptions,
                                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap interval as computed before: the whole fit on the gathered columns, one resample at a time."""
    n, K = phi.shape
    if options.bootstrap == 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    draws = np.empty((options.bootstrap, n))
    for b in range(options.bootstrap):
        cols = rng.integers(0, K, K)
        f, _ = _fit(phi[:, cols], inside[:, cols], priors)
        draws[b] = _llr(phi_t, f)
    a = (1.0 - options.interval) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = nanpercentile_columns(draws, [100 * a, 100 * (1 - a)])
    return lo, hi


def torch_grad_norms_vmap(net: "object", X: np.ndarray, y: np.ndarray, chunk: int = 512) -> np.ndarray:
    """(n,) per-sample gradient norms of the cross-entropy of the torch module ``net``, as the gradient attacker
    computed them before: ``vmap(grad(loss))`` over chunks of rows, squares summed in float64."""
    import torch
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in net.named_parameters()}  # type: ignore[attr-defined]

    def loss_fn(p: dict, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = functional_call(net, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, t.unsqueeze(0))

    g = vmap(grad(loss_fn), in_dims=(None, 0, 0))
    out = []
    for s in range(0, len(y), chunk):
        xb = torch.as_tensor(np.ascontiguousarray(X[s:s + chunk]), dtype=torch.float32)
        yb = torch.as_tensor(y[s:s + chunk], dtype=torch.long)
        grads = g(params, xb, yb)
        sq = sum(v.reshape(len(yb), -1).double().pow(2).sum(1) for v in grads.values())
        out.append(sq.sqrt().numpy())
    return np.concatenate(out)
