"""Membership-inference-privacy noise wrapper (``kind: mip``; Izzo et al. 2023, Algorithm 1).

Wraps any defender whose released model is a parameter vector θ ∈ R^d (``base``: a torch head —
``torch_mlp``, ``dp_sgd``, ``alibi``, ``agibi`` — ``logistic_regression``, or ``kind: sklearn`` with a
linear estimator: ``logistic_regression``, ``linear_svc``, ``sgd_svm``, ``perceptron``):

1. σ estimation (Algorithm 1, lines 2-9): train ``base`` on ``B = half_splits`` random halves of
   the training set; ``σ_j = ((1/B) Σ_i |θ_j^(i) − θ̄_j|^M)^{1/M}`` (the naive, consistent estimator
   the paper uses). A coordinate that never moves gets ``σ_j = sigma_floor`` (noise needs σ > 0).
2. Train ``base`` on the whole training set → θ, release ``θ̂ = θ + X`` where X has density
   ∝ ``exp(−‖x‖_{σ,M}/b)``, ``b = (6.16/η)^{1+2/M}`` (Theorem 7 / Corollary 8), drawn by
   :func:`privaudit.stats.sample_mip_noise` (GenNormal direction, **Gamma(d, b) radius** — the
   density Theorem 7 needs; the Laplace radius printed in Corollary 8 is not, see ``stats.mip``).

Deviation from Algorithm 1 line 1: the split stage already drew D_train as a random half of the
data (the Defender set), so the wrapper trains on all rows it is given.

Claims η-MIP, not DP: ``claimed_epsilon()`` is None; ``describe()`` reports ``mip_eta`` and
``epsilon_equivalent`` (the ε whose DP would give the same η, Theorem 4). Note the noise is large:
E‖X‖_{σ,M} = d·b, e.g. b ≈ 3,795 at η = 0.1, M = 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from privaudit.defenders.base import Defender, WrappingDefender
from privaudit.defenders.registry import make_defender, register
from privaudit.defenders.sklearn_zoo import SklearnDefender
from privaudit.defenders.specs import MipSpec
from privaudit.defenders.torch_head import TorchHeadDefender
from privaudit.stats import epsilon_for_mip_eta, mip_noise_scale, mip_norm, sample_mip_noise
from privaudit.seeding import draw_seed


def get_vector(model: Defender[Any]) -> np.ndarray:
    """The fitted parameters of ``model`` as a float64 vector (d,)."""
    if isinstance(model, TorchHeadDefender):
        if model.net is None:
            raise RuntimeError(f"defender {model.name!r} is not fitted")
        return torch.cat([p.detach().reshape(-1).double().cpu() for p in model.net.parameters()]).numpy()
    if isinstance(model, SklearnDefender):
        est = model._require_model()
        return np.concatenate([np.ravel(est.coef_), np.ravel(est.intercept_)]).astype(np.float64)
    raise ValueError(f"defender kind {model.kind!r} has no parameter vector")


def set_vector(model: Defender[Any], vec: np.ndarray) -> None:
    """Write the vector (d,) back into ``model`` (inverse of :func:`get_vector`)."""
    if isinstance(model, TorchHeadDefender):
        if model.net is None:
            raise RuntimeError(f"defender {model.name!r} is not fitted")
        torch.nn.utils.vector_to_parameters(torch.as_tensor(vec, dtype=torch.float32), model.net.parameters())
        return
    if not isinstance(model, SklearnDefender):
        raise ValueError(f"defender kind {model.kind!r} has no parameter vector")
    est = model._require_model()
    k = est.coef_.size
    est.coef_ = vec[:k].reshape(est.coef_.shape).astype(est.coef_.dtype)
    est.intercept_ = vec[k:].reshape(np.shape(est.intercept_)).astype(np.asarray(est.intercept_).dtype)


@register("mip")
class MipDefender(WrappingDefender[MipSpec]):
    """Izzo et al. Algorithm 1 around ``base``; saved in the base model's format."""

    def __init__(self, spec: MipSpec, n_classes: int, device: str = "cpu") -> None:
        super().__init__(spec, n_classes, device)
        self.base_spec = spec.base.model_copy(update={"name": f"{spec.name}.base"})
        self.inner = make_defender(self.base_spec, n_classes, device)
        self.model_suffix = self.inner.model_suffix  # type: ignore[misc]
        self.sigma_: np.ndarray | None = None
        self.theta_: np.ndarray | None = None
        self.noise_: np.ndarray | None = None

    def released(self) -> Defender[Any]:
        """The base model with the MIP noise added to its parameters."""
        return self.inner

    def noise_scale(self) -> float:
        """b = (6.16/η)^{1+2/M} (Corollary 8), in units of ‖·‖_{σ,M}."""
        return mip_noise_scale(self.spec.eta, self.spec.moment)

    def estimate_sigma(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """σ_j over ``half_splits`` random halves (Algorithm 1, lines 2-9); shape (d,)."""
        n = len(y)
        if n < 4:
            raise ValueError(f"defender {self.name!r}: MIP needs at least 4 training rows, got {n}")
        thetas = []
        for _ in range(self.spec.half_splits):
            idx = np.sort(rng.choice(n, size=n // 2, replace=False))
            m = make_defender(self.base_spec, self.n_classes, self.device)
            m.fit(X[idx], y[idx], seed=draw_seed(rng))
            thetas.append(get_vector(m))
        th = np.stack(thetas)
        mm = self.spec.moment
        sigma = np.mean(np.abs(th - th.mean(axis=0)) ** mm, axis=0) ** (1.0 / mm)
        return np.maximum(sigma, self.spec.sigma_floor)

    def draw_noise(self, sigma: np.ndarray, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Noise X with density ∝ exp(−‖x‖_{σ,M}/b) (Gamma(d, b) radius); (d,) or (size, d)."""
        return sample_mip_noise(sigma, self.spec.eta, rng, moment=self.spec.moment, size=size)

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int) -> "MipDefender":
        rng = np.random.default_rng(seed)
        self.sigma_ = self.estimate_sigma(X, y, rng)
        self.inner = make_defender(self.base_spec, self.n_classes, self.device)
        self.inner.fit(X, y, seed=draw_seed(rng))
        self.theta_ = get_vector(self.inner)
        self.noise_ = self.draw_noise(self.sigma_, rng)
        set_vector(self.inner, self.theta_ + self.noise_)
        return self

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(mip_eta=self.spec.eta, epsilon_equivalent=epsilon_for_mip_eta(self.spec.eta),
                   noise_scale_b=self.noise_scale(), base_kind=self.base_spec.kind)
        if self.sigma_ is not None and self.noise_ is not None:
            out.update(n_parameters=int(self.sigma_.size), sigma_median=float(np.median(self.sigma_)),
                       noise_norm=float(mip_norm(self.noise_, self.sigma_, self.spec.moment)))
        return out
