"""Label-DP by soft randomized response: ALIBI and AGIBI (Malek et al. 2021, §5 and App. D).

Only the *labels* are protected (label-DP): features are used as they are.

* ``kind: alibi`` (§5.2, Algorithm 3): the one-hot label ``e_y`` plus i.i.d. Laplace noise of
  scale ``λ = 2/ε`` per coordinate (L1 sensitivity 2), drawn once per example, is ε-label-DP.
  Bayesian post-processing (eq. (1)-(2)) turns the noisy vector ``o`` into soft labels
  ``p(y=c | o) ∝ p(c) · exp(−‖o − e_c‖₁ / λ)``.
* ``kind: agibi`` (App. D.2): Gaussian noise ``N(0, σ²)`` per coordinate with σ from the analytic
  Gaussian mechanism (:func:`privaudit.stats.gaussian_mechanism.gaussian_mechanism_sigma`) at (ε, δ)
  and L2 sensitivity √2; posterior ``softmax(o_c/σ² + log p(c))`` (eq. (5)).
* ``postprocess: simplex`` replaces the Bayesian step by the Euclidean projection of ``o`` onto the
  simplex (App. D.1, Algorithm 4, :func:`privaudit.defenders.simplex.project_simplex`).

The prior ``p(c)`` is uniform, or (``prior: noisy``) the mean of the noisy vectors (unbiased for
the class frequencies; post-processing, so free). A torch head
(:func:`privaudit.defenders.torch_head.build_mlp`) is then trained with soft-label cross-entropy.
Everything after the noise is post-processing, so the recipe claims ε (label-DP) whatever the head.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import numpy as np
import torch
from scipy.special import softmax
from torch import nn

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.defenders.registry import register
from privaudit.defenders.simplex import project_simplex
from privaudit.defenders.specs import AgibiSpec, AlibiSpec, TorchMLPSpec
from privaudit.defenders.torch_head import TorchHeadDefender

AlibiSpecT = TypeVar("AlibiSpecT", bound=AlibiSpec)
from privaudit.stats.gaussian_mechanism import gaussian_mechanism_sigma
from privaudit.seeding import draw_seed


def alibi_posterior(o: np.ndarray, lam: float, log_prior: np.ndarray) -> np.ndarray:
    """ALIBI soft labels ``p(c|o) ∝ p(c) exp(−‖o − e_c‖₁/λ)`` (Malek et al. eq. (1)-(2)).

    ``‖o − e_c‖₁ = ‖o‖₁ − |o_c| + |o_c − 1|``, so only ``|o_c − 1| − |o_c|`` depends on c.
    Args: ``o`` (n, C) noisy vectors, ``lam`` the Laplace scale, ``log_prior`` (C,). Returns (n, C).
    """
    logits = log_prior[None, :] - (np.abs(o - 1.0) - np.abs(o)) / lam
    return softmax(logits, axis=1)


def agibi_posterior(o: np.ndarray, sigma: float, log_prior: np.ndarray) -> np.ndarray:
    """AGIBI soft labels ``softmax(o_c/σ² + log p(c))`` (Malek et al. App. D.2, eq. (5)); (n, C)."""
    return softmax(o / sigma**2 + log_prior[None, :], axis=1)


def train_soft_head(net: nn.Sequential, X: np.ndarray, targets: np.ndarray, spec: TorchMLPSpec,
                    rng: np.random.Generator, device: str) -> nn.Sequential:
    """Minibatch SGD (momentum, weight decay) of ``net`` on soft labels ``targets`` (n, C).

    Same loop as :class:`privaudit.defenders.torch_head.TorchMLPDefender` with probability
    targets: ``fixed`` keeps data order, otherwise the order of each epoch comes from ``rng``.
    """
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device)
    Tt = torch.as_tensor(targets, dtype=torch.float32, device=device)
    opt = torch.optim.SGD(net.parameters(), lr=spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    n = len(X)
    for _ in range(spec.epochs):
        order = np.arange(n) if spec.randomness == "fixed" else rng.permutation(n)
        idx_all = torch.as_tensor(order, device=device)
        for start in range(0, n, spec.batch_size):
            idx = idx_all[start:start + spec.batch_size]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(Xt[idx]), Tt[idx]).backward()
            opt.step()
    return net.eval()


class _SoftLabelHead(TorchHeadDefender[AlibiSpecT]):
    """ALIBI and AGIBI: noisy one-hot labels, post-processed into soft labels, then a torch head."""

    @property
    def deterministic(self) -> bool:
        return False  # the label noise is secret randomness drawn from the seed

    def noise_scale(self) -> float:
        """Laplace scale λ = 2/ε (L1 sensitivity of a one-hot label is 2)."""
        return 2.0 / self.spec.epsilon

    def _noise(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return rng.laplace(0.0, self.noise_scale(), size=shape)

    def _posterior(self, o: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
        return alibi_posterior(o, self.noise_scale(), log_prior)

    def soft_labels(self, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy one-hot labels, post-processed into soft labels (n, C) that sum to 1."""
        onehot = np.eye(self.n_classes)[y]
        o = onehot + self._noise(rng, onehot.shape)
        if self.spec.postprocess == "simplex":
            return project_simplex(o)
        if self.spec.prior == "noisy":
            prior = np.clip(o.mean(axis=0), 1e-3, None)
            log_prior = np.log(prior / prior.sum())
        else:
            log_prior = np.full(self.n_classes, -math.log(self.n_classes))
        return self._posterior(o, log_prior)

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "_SoftLabelHead[AlibiSpecT]":
        rng = np.random.default_rng(seed)
        noise_rng = np.random.default_rng(rng.integers(2**63 - 1))
        init_seed = self.spec.random_state if self.spec.randomness != "unseeded" else draw_seed(rng)
        targets = self.soft_labels(np.asarray(y, dtype=np.int64), noise_rng)
        self.d_in = int(X.shape[1])
        self.net = train_soft_head(self._init_net(self.d_in, init_seed), X, targets, self.spec, rng, self.device)
        return self

    def claimed_epsilon(self) -> float | None:
        return float(self.spec.epsilon)

    def claimed_neighbourhood(self) -> str:
        return Neighbourhood.REPLACE_LABEL  # label-DP: two data sets differ in one label

    def claimed_mechanism(self) -> Any:
        """ALIBI: Laplace of scale 2/ε on the one-hot label (L1 sensitivity 2): scale/sensitivity 1/ε."""
        from privaudit.claims.mechanisms import LaplaceMechanism

        return LaplaceMechanism(kind="laplace", scale=1.0 / float(self.spec.epsilon))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "privacy_unit": "label",
                "note": "label-DP: only the labels are protected; features are used without noise",
                "noise_scale": self.noise_scale()}


@register("alibi")
class AlibiDefender(_SoftLabelHead[AlibiSpec]):
    """ALIBI: Laplace soft randomized response + Bayesian (or simplex) post-processing + torch head."""


@register("agibi")
class AgibiDefender(_SoftLabelHead[AgibiSpec]):
    """AGIBI: Gaussian soft randomized response (analytic Gaussian mechanism, L2 sensitivity √2)."""

    def noise_scale(self) -> float:
        """σ of the analytic Gaussian mechanism at (ε, δ) with L2 sensitivity √2."""
        return gaussian_mechanism_sigma(self.spec.epsilon, self.spec.delta, sensitivity=math.sqrt(2.0))

    def _noise(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return rng.normal(0.0, self.noise_scale(), size=shape)

    def _posterior(self, o: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
        return agibi_posterior(o, self.noise_scale(), log_prior)

    def claimed_delta(self) -> float | None:
        return float(self.spec.delta)

    def claimed_mechanism(self) -> Any:
        """Gaussian of σ on the one-hot label (L2 sensitivity √2): noise multiplier σ/√2."""
        from privaudit.claims.mechanisms import GaussianMechanism

        return GaussianMechanism(kind="gaussian", noise_multiplier=self.noise_scale() / math.sqrt(2.0))


__all__ = ["AlibiSpec", "AgibiSpec", "AlibiDefender", "AgibiDefender", "alibi_posterior",
           "agibi_posterior", "train_soft_head"]
