"""Plain user trainers (``kind: python`` protocol) for the black-box one-run audit.

``train_dp_sgd(X, y, n_classes, seed, **options) -> LinearSoftmax``: a small numpy DP-SGD loop
(Abadi et al. 2016) for a linear softmax head, with Poisson sampling at rate
``q = batch_size / n``, per-example clipping to ``max_grad_norm``, Gaussian noise
``N(0, (sigma C)^2)`` on the summed clipped gradients, division by the expected batch size, and
``steps = epochs * round(1/q)``; sigma is calibrated by opacus's ``get_noise_multiplier`` (RDP
accountant, add/remove neighbours) so that the recipe *claims* ``(epsilon, delta)``.

Planted bugs (the claim stays (epsilon, delta)), the catalogue of issue 14 as plain trainers:

* ``bug="sigma_div4"`` (a): sigma divided by 4;
* ``bug="sigma_10x_data"`` (b): sigma calibrated for a data set 10x larger (q/10, 10x the steps);
* ``bug="no_clip"`` (c): the per-example gradients are not clipped (noise still sigma * C);
* ``bug="no_noise"`` (d): no noise is added;
* ``bug="noise_once_per_epoch"`` (e): noise only at the first step of each epoch;
* ``bug="reused_noise"`` (f): one noise draw reused at every step;
* ``bug="shuffled"`` (g): fixed-size batches from a shuffle, each row once per epoch.

A black-box audit sees only the final model: (c) and (d) are caught by the one-run audit
(``tests/one_run/test_gate_catches.py``); what it sees of the others is measured in
``benchmarks/bench_catalogue_blackbox.py`` (the white-box audit catches all seven).

The sampling rate is ``batch_size / n'`` with ``n' = len(X)`` rounded down to a multiple of 16 (so
the opacus calibration is cached across runs), and both sampling and accountant use that q.  As in
opacus (1/len(dataloader)) q depends on the data size; strictly, a DP guarantee needs q fixed
independently of the data, a negligible difference here.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np

BUGS = (None, "sigma_div4", "sigma_10x_data", "no_clip", "no_noise", "noise_once_per_epoch", "reused_noise",
        "shuffled")


class LinearSoftmax:
    """softmax(X W^T + b) with ``state_dict()`` so the user defender can save it."""

    def __init__(self, W: np.ndarray, b: np.ndarray) -> None:
        self.W, self.b = W, b

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        z = np.asarray(X, dtype=np.float64) @ self.W.T + self.b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"W": self.W.astype(np.float32), "b": self.b.astype(np.float32)}


def load(state: dict[str, np.ndarray], n_classes: int, **options: object) -> LinearSoftmax:
    return LinearSoftmax(state["W"].astype(np.float64), state["b"].astype(np.float64))


@lru_cache(maxsize=64)
def noise_multiplier(epsilon: float, delta: float, q: float, steps: int, accountant: str = "rdp") -> float:
    """sigma such that ``steps`` Poisson-subsampled Gaussian steps at rate q are (epsilon, delta)-DP."""
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():  # "Optimal order is the largest alpha": the bound is still valid
        warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
        return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps,
                                          accountant=accountant))


def accountant_epsilon(sigma: float, q: float, steps: int, delta: float, accountant: str = "rdp") -> float:
    """epsilon the accountant certifies for (sigma, q, steps) at delta."""
    from opacus.accountants import create_accountant

    acc = create_accountant(mechanism=accountant)
    acc.history = [(sigma, q, steps)]
    return float(acc.get_epsilon(delta=delta))


def recipe(n: int, epsilon: float, delta: float, epochs: int, batch_size: int) -> tuple[float, int, float]:
    """``(q, steps, sigma)`` of the DP-SGD recipe on n rows."""
    n_public = max(16, 16 * (n // 16))  # n rounded down to a multiple of 16: q (and sigma) repeat across runs
    q = min(1.0, batch_size / n_public)
    steps = int(epochs * round(1.0 / q))
    return q, steps, noise_multiplier(float(epsilon), float(delta), float(q), steps)


def train_dp_sgd(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, *, epsilon: float = 1.0,
                 delta: float = 1e-5, epochs: int = 20, batch_size: int = 64, lr: float = 0.5,
                 max_grad_norm: float = 1.0, bug: str | None = None) -> LinearSoftmax:
    """DP-SGD linear softmax head; ``bug`` plants one of the catalogue's bugs (module docstring)."""
    if bug not in BUGS:
        raise ValueError(f"bug must be one of {BUGS}, got {bug!r}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    n, d = X.shape
    q, steps, sigma = recipe(n, epsilon, delta, epochs, batch_size)
    if bug == "sigma_div4":
        sigma /= 4.0
    elif bug == "sigma_10x_data":
        sigma = recipe(10 * n, epsilon, delta, epochs, batch_size)[2]
    per_epoch = max(1, round(1.0 / q))
    rng = np.random.default_rng(seed)
    Xb = np.hstack([X, np.ones((n, 1))])  # bias as a last feature
    xnorm = np.linalg.norm(Xb, axis=1)
    Y = np.eye(n_classes)[y]
    Wb = np.zeros((n_classes, d + 1))
    C = float(max_grad_norm)
    expected_batch = q * n
    reused = rng.normal(0.0, sigma * C, size=Wb.shape) if bug == "reused_noise" else None
    order = np.arange(n)
    for t in range(steps):
        if bug == "shuffled":
            if t % per_epoch == 0:
                order = rng.permutation(n)
            idx = order[(t % per_epoch) * int(expected_batch):(t % per_epoch + 1) * int(expected_batch)]
        else:
            idx = np.flatnonzero(rng.random(n) < q)
        if bug == "no_noise" or (bug == "noise_once_per_epoch" and t % per_epoch):
            noise = 0.0
        elif bug == "reused_noise":
            noise = reused
        else:
            noise = rng.normal(0.0, sigma * C, size=Wb.shape)
        if idx.size:
            z = Xb[idx] @ Wb.T
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            err = p - Y[idx]  # per-example gradient = err_i (outer) x_i, norm |err_i| |x_i|
            if bug != "no_clip":
                norms = np.linalg.norm(err, axis=1) * xnorm[idx]
                err = err * np.minimum(1.0, C / np.maximum(norms, 1e-12))[:, None]
            grad = err.T @ Xb[idx]
        else:
            grad = 0.0
        Wb -= lr * (grad + noise) / expected_batch
    return LinearSoftmax(Wb[:, :d].copy(), Wb[:, d].copy())


def train_correct(X, y, n_classes, seed, **options):  # noqa: ANN001, ANN201 - user protocol
    return train_dp_sgd(X, y, n_classes, seed, **options)


def train_no_clip(X, y, n_classes, seed, **options):  # noqa: ANN001, ANN201
    return train_dp_sgd(X, y, n_classes, seed, bug="no_clip", **options)


def train_no_noise(X, y, n_classes, seed, **options):  # noqa: ANN001, ANN201
    return train_dp_sgd(X, y, n_classes, seed, bug="no_noise", **options)


class ClassSums:
    """softmax(x S^T): S the (noisy) per-class sums of clipped rows."""

    def __init__(self, S: np.ndarray) -> None:
        self.S = S

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        z = np.asarray(X, dtype=np.float64) @ self.S.T
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"S": self.S.astype(np.float32)}


def train_gaussian_class_sums(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, *, mu: float = 1.0,
                              clip: float = 1.0) -> ClassSums:
    """Exactly mu-GDP trainer (add/remove one row): the Gaussian mechanism on clipped class sums.

    ``S_c = sum_{i: y_i = c} clip(x_i) + N(0, sigma^2 I)`` with ``sigma = clip / mu``: adding or
    removing a row moves the concatenated (S_1..S_K) by at most ``clip`` in L2, so the release is
    mu-GDP (the Gaussian mechanism of Dong, Roth & Su 2022), and tight: for the worst-case neighbour the
    trade-off curve is exactly G_mu.  The model is post-processing.
    """
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xc = X * np.minimum(1.0, clip / np.maximum(norms, 1e-12))
    S = np.zeros((n_classes, X.shape[1]))
    np.add.at(S, np.asarray(y), Xc)
    S += np.random.default_rng(seed).normal(0.0, clip / mu, size=S.shape)
    return ClassSums(S)
