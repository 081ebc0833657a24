"""The white-box gradient LTU attacker (Pedersen et al. 2022, Fig. 2 branch (4)).

One gradient step of the training loss (cross-entropy) from M_D's parameters on u1 and on u2;
the candidate with the smaller gradient norm is guessed to be the member (a trained model sits
near a stationary point of its own training samples' losses).

* torch heads (``kind: torch_mlp``): exact per-sample gradient norms over all parameters, from the safetensors
  weights M_D was saved with, by the identity of a linear layer's per-example gradient ``δ_i a_iᵀ`` (norm
  ``‖δ_i‖·‖a_i‖``; the bias ``‖δ_i‖``; Goodfellow 2015, "Efficient Per-Example Gradient Computations",
  arXiv:1510.01799, §3): one forward and one backward pass of the whole batch in float64
  (:func:`privaudit.train.heads.output_deltas`, the batched trainer's own per-example norms), no per-example
  gradient materialised. ``torch.func``'s vmap of grad materialised them: 19.9 s for the 50 000 rows of the
  50k × 512 audit on an H200 machine's CPU (fourth lease), ~1.5 s at 10k × 128 on 2 cores;
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


def _torch_grad_norms(model: object, X: np.ndarray, y: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """(n,) ‖∇_θ CE(f_θ(x_i), y_i)‖₂ of a ``build_mlp`` head (Linear layers with ReLU between them), in float64."""
    import torch
    from torch import nn

    from privaudit.train.heads import StackedHeads, forward, output_deltas

    net = getattr(model, "net", None)
    if net is None:
        raise NotApplicable("torch defender has no loaded network")
    layers = list(net) if isinstance(net, nn.Sequential) else []
    linears = [m for m in layers if isinstance(m, nn.Linear)]
    if not linears or any(not isinstance(m, (nn.Linear, nn.ReLU)) for m in layers) or any(
            isinstance(a, nn.ReLU) == isinstance(b, nn.ReLU) for a, b in zip(layers, layers[1:])):
        raise NotApplicable(f"torch defender's network is not Linear layers with ReLU between them: {net}")
    heads = StackedHeads([m.weight.detach().double().cpu().unsqueeze(0) for m in linears],
                         [m.bias.detach().double().cpu().unsqueeze(0) for m in linears])
    out = []
    with torch.no_grad():
        for s in range(0, len(y), chunk):
            xb = torch.as_tensor(np.ascontiguousarray(X[s:s + chunk]), dtype=torch.float64)
            yb = torch.as_tensor(y[s:s + chunk], dtype=torch.long).unsqueeze(0)
            logits, inputs, pre = forward(heads, xb)
            _, norms = output_deltas(heads, logits, yb, inputs, pre)
            out.append(norms[0].numpy())
    return np.concatenate(out) if out else np.zeros(0)


class GradientAttacker:
    """Smaller per-sample gradient norm at M_D → member (vectorised over rounds)."""

    name = "gradient"

    def __init__(self) -> None:
        self.metrics_extra: dict[str, str] = {}
        # the last table and its norms: guess() and then the evaluator's per-sample scores ask for the same
        # table, and a torch head's norms cost a forward and a backward pass over every row
        self._norms: tuple[AttackTable, np.ndarray] | None = None

    def sample_scores(self, table: AttackTable) -> np.ndarray:
        """(n,) membership scores −‖∇ℓ‖ (raises :class:`NotApplicable`)."""
        self.metrics_extra = {"gradient": "analytic (logistic regression)" if _is_logreg(table.spec)
                              else "per-example norms by the linear-layer identity (float64)"}
        if self._norms is None or self._norms[0] is not table:
            self._norms = (table, gradient_norms(table))
        return -self._norms[1]

    def guess(self, batch: RoundBatch) -> np.ndarray:
        s = self.sample_scores(batch.table)
        return pairwise_guess(s[batch.u1], s[batch.u2])
