"""The batched SGD trainer against the plain per-model loop a user would write (``torch.optim.SGD``, autograd).

Same initialisation (:func:`initial_heads`), same per-epoch orders (every epoch a fresh ``torch.rand`` key per
row of every model, invalid rows last, stable argsort — the draws ``train_heads`` documents), mean
cross-entropy over each batch, ``torch.optim.SGD`` with momentum and weight decay: the parameters agree up to
float rounding. A trainer that reused an epoch's order, dropped the last short batch, skipped a model's
momentum or mixed up the rows of two models would differ far beyond it.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from privaudit.train import HeadRecipe, TrainData, train_heads
from privaudit.train.batched import initial_heads


def _reference(recipe: HeadRecipe, data: TrainData, classes: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    init = initial_heads(recipe, data, classes, gen)
    valid = data.valid_rows()
    M, N = valid.shape
    X = torch.cat([data.X_base.expand(M, -1, -1)] + ([data.X_extra] if data.n_extra else []), dim=1)
    y = torch.cat([data.y_base.expand(M, -1)] + ([data.y_extra] if data.n_extra else []), dim=1)
    params = [[p[m].clone().requires_grad_(True) for wb in zip(init.weights, init.biases) for p in wb]
              for m in range(M)]
    opts = [torch.optim.SGD(ps, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay)
            for ps in params]
    for _ in range(recipe.epochs):
        keys = torch.rand(M, N, generator=gen).masked_fill_(~valid, float("inf"))
        order = torch.argsort(keys, dim=1, stable=True)
        for m in range(M):
            rows = order[m, :int(valid[m].sum())]
            for s in range(0, len(rows), recipe.batch_size):
                b = rows[s:s + recipe.batch_size]
                h = X[m, b]
                ps = params[m]
                for i in range(0, len(ps), 2):
                    h = h @ ps[i].t() + ps[i + 1]
                    if i + 2 < len(ps):
                        h = torch.relu(h)
                opts[m].zero_grad()
                F.cross_entropy(h, y[m, b]).backward()
                opts[m].step()
    return torch.stack([torch.cat([p.detach().reshape(-1) for p in ps]) for ps in params])


@pytest.mark.parametrize("hidden", [(), (5,)])
@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 1e-2)])
def test_batched_sgd_equals_the_per_model_loop(hidden, momentum, weight_decay) -> None:
    g = torch.Generator().manual_seed(1)
    M, n, d, classes = 4, 29, 6, 3
    X, y = torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)
    data = TrainData(X, y, n_models=M, include=torch.rand(M, n, generator=g) < 0.75,
                     X_extra=torch.randn(M, 2, d, generator=g), y_extra=torch.randint(0, classes, (M, 2), generator=g))
    recipe = HeadRecipe(hidden, 4, 6, 0.2, momentum=momentum, weight_decay=weight_decay)
    got = train_heads(recipe, data, classes, torch.Generator().manual_seed(7)).flat()
    want = _reference(recipe, data, classes, 7)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
