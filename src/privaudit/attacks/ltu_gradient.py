"""The white-box gradient LTU attacker (Pedersen et al. 2022, Fig. 2 branch (4)).

One gradient step of the training loss (cross-entropy) from M_D's parameters on u1 and on u2;
the candidate with the smaller gradient norm is guessed to be the member (a trained model sits
near a stationary point of its own training samples' losses).

* torch heads (``kind: torch_mlp``): exact per-sample gradients with ``torch.func`` (vmap of grad)
  over all parameters, from the safetensors weights M_D was saved with;
* logistic regression (sklearn): analytically, ∇_{W,b} CE = (p − e_y) ⊗ [x, 1], so the norm is
  ‖p − e_y‖₂ · √(‖x‖₂² + 1);
* other trainers have no gradient: :class:`NotApplicable` with the reason, recorded in
  ``metrics/ltu.json`` under ``not_applicable`` instead of a result.
"""

from __future__ import annotations

import numpy as np

from privaudit.attacks.ltu import AttackTable, RoundBatch
from privaudit.attacks.ltu_scores import pairwise_guess
from privaudit.defenders.specs import DefenderSpecBase, SklearnSpec


class NotApplicable(Exception):
    """The attacker cannot attack this defender (the message says why)."""


def _is_logreg(spec: DefenderSpecBase | None) -> bool:
    """``kind: logistic_regression`` or ``kind: sklearn`` with ``estimator: logistic_regression``."""
    return isinstance(spec, SklearnSpec) and spec.estimator == "logistic_regression"


def gradient_norms(table: AttackTable) -> np.ndarray:
    """(n,) per-sample gradient norms of the cross-entropy at M_D's parameters."""
    spec, model = table.spec, table.model
    if spec is None or model is None:
        raise NotApplicable("needs the trained model M_D and its spec (white-box)")
    if _is_logreg(spec):
        onehot = np.eye(table.n_classes)[table.y]
        x2 = (table.X.astype(np.float64) ** 2).sum(axis=1)
        return np.linalg.norm(table.proba - onehot, axis=1) * np.sqrt(x2 + 1.0)
    if spec.kind == "torch_mlp":
        return _torch_grad_norms(model, table.X, table.y)
    estimator = spec.estimator if isinstance(spec, SklearnSpec) else None
    raise NotApplicable(f"defender kind {spec.kind!r} "
                        f"{'(' + estimator + ') ' if estimator else ''}"
                        "exposes no gradient (white-box attack defined for torch heads and logistic regression)")


def _torch_grad_norms(model: object, X: np.ndarray, y: np.ndarray, chunk: int = 512) -> np.ndarray:
    import torch
    from torch.func import functional_call, grad, vmap

    net = getattr(model, "net", None)
    if net is None:
        raise NotApplicable("torch defender has no loaded network")
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss_fn(p: dict, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = functional_call(net, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, t.unsqueeze(0))

    g = vmap(grad(loss_fn), in_dims=(None, 0, 0))
    out = []
    dev = next(net.parameters()).device
    for s in range(0, len(y), chunk):
        xb = torch.as_tensor(np.ascontiguousarray(X[s:s + chunk]), dtype=torch.float32, device=dev)
        yb = torch.as_tensor(y[s:s + chunk], dtype=torch.long, device=dev)
        grads = g(params, xb, yb)
        sq = sum(v.reshape(len(yb), -1).double().pow(2).sum(1) for v in grads.values())
        out.append(sq.sqrt().cpu().numpy())
    return np.concatenate(out)


class GradientAttacker:
    """Smaller per-sample gradient norm at M_D → member (vectorised over rounds)."""

    name = "gradient"

    def __init__(self) -> None:
        self.metrics_extra: dict[str, str] = {}
        # the last table and its norms: guess() and then the evaluator's per-sample scores ask for the same
        # table, and a torch head's norms cost a per-sample gradient pass over every row (1.4-1.6 s at 10k x 128)
        self._norms: tuple[AttackTable, np.ndarray] | None = None

    def sample_scores(self, table: AttackTable) -> np.ndarray:
        """(n,) membership scores −‖∇ℓ‖ (raises :class:`NotApplicable`)."""
        self.metrics_extra = {"gradient": "analytic (logistic regression)" if _is_logreg(table.spec)
                              else "torch.func per-sample"}
        if self._norms is None or self._norms[0] is not table:
            self._norms = (table, gradient_norms(table))
        return -self._norms[1]

    def guess(self, batch: RoundBatch) -> np.ndarray:
        s = self.sample_scores(batch.table)
        return pairwise_guess(s[batch.u1], s[batch.u2])
