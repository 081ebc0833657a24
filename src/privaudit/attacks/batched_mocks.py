"""Mock / reference defenders trained many at once with the batched trainer (:mod:`privaudit.train`).

Two attackers retrain the defender's trainer T_D many times on slightly different data:

* ``retrain`` (Pedersen et al. 2022, Theorem 3): per LTU round two mocks on
  (D_D − {d}) ∪ {u1} and (D_D − {d}) ∪ {u2}, the candidate in the hidden sample's slot of the
  public training order;
* ``lira`` / ``rmia`` reference models (LiRA offline (Carlini et al. 2022); RMIA): K models on
  random subsets of D_R.

For specs with a batched recipe (``kind: torch_mlp`` / ``dp_sgd``;
:func:`privaudit.defenders.recipes.recipe_from_spec` is not None) all models of a chunk of at most
``max_models`` are trained in one call of :func:`privaudit.train.train_heads`: the attack table's
features are the shared base rows, model m keeps its own rows through ``include[m]`` and visits
them in its own list order through ``order_key[m]`` (used when the recipe does not shuffle, i.e.
``randomness: fixed``, so a mock replays the defender's public order exactly as
:meth:`privaudit.defenders.torch_head.TorchMLPDefender.fit` does).

Randomness: each chunk's ``torch.Generator`` is seeded from the per-model seeds the caller drew
from its own generator (``AttackTable.rng``), so the same parameters give the same numbers;
the numbers do depend on ``max_models`` (how models are grouped into calls).
"""

from __future__ import annotations


import numpy as np
import torch

from privaudit.train import HeadRecipe, StackedHeads, TrainData, predict_proba, train_heads
from privaudit.defenders.specs import DefenderSpecBase

#: default upper bound on the number of models trained in one batched call (memory chunk)
MAX_MODELS = 256

#: upper bound on M × rows × classes float64 probabilities held at once while predicting
_PREDICT_BLOCK = 1 << 22


def _check_max_models(max_models: int, minimum: int) -> None:
    if int(max_models) < minimum:
        raise ValueError(f"max_models must be >= {minimum}, got {max_models}")


def chunk_generator(seeds: np.ndarray, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded from the (k,) integer seeds of one chunk's models."""
    state = np.random.SeedSequence([int(s) for s in np.asarray(seeds).ravel()]).generate_state(2, np.uint64)
    return torch.Generator(device=device).manual_seed(int(state[0] >> np.uint64(1)))


def train_mock_heads(recipe: HeadRecipe, X: np.ndarray, y: np.ndarray, rows: np.ndarray, n_classes: int,
                     generator: torch.Generator, device: torch.device | str = "cpu") -> StackedHeads:
    """Train M heads in one batched call, model m on ``X[rows[m]]`` in that row order.

    Args:
        recipe: the batched recipe of the defender spec (calibrated for ``rows.shape[1]`` rows).
        X: (n, d) features (the shared base rows); y: (n,) labels.
        rows: (M, m_rows) int table rows of each model's training list, in training order; rows
            of one list must be distinct.
        n_classes: C.
        generator: randomness of the call (initialisation unless shared, orders, DP noise), on
            ``device``.
        device: where to train.

    Returns:
        The M trained heads (on ``device``).
    """
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] < 1:
        raise ValueError(f"rows must be a non-empty (M, m_rows) array, got shape {rows.shape}")
    n = len(y)
    if rows.min() < 0 or rows.max() >= n:
        raise ValueError(f"rows must lie in [0, {n}), got values in [{rows.min()}, {rows.max()}]")
    M, m_rows = rows.shape
    model = np.repeat(np.arange(M), m_rows)
    include = np.zeros((M, n), bool)
    include[model, rows.ravel()] = True
    if int(include.sum()) != rows.size:
        bad = int(np.flatnonzero(include.sum(1) != m_rows)[0])
        raise ValueError(f"rows of model {bad} are not distinct")
    key = np.zeros((M, n), np.float32)
    key[model, rows.ravel()] = np.tile(np.arange(m_rows, dtype=np.float32), M)
    data = TrainData(
        torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device),
        torch.as_tensor(np.asarray(y), dtype=torch.int64, device=device),
        n_models=M,
        include=torch.as_tensor(include, device=device),
        order_key=None if recipe.shuffle or recipe.dp is not None else torch.as_tensor(key, device=device),
    )
    return train_heads(recipe, data, n_classes, generator)


def _row_blocks(n: int, M: int, C: int) -> list[slice]:
    step = max(1, _PREDICT_BLOCK // max(1, M * C))
    return [slice(s, min(n, s + step)) for s in range(0, n, step)]


def proba_distances(heads: StackedHeads, X: torch.Tensor, proba: np.ndarray) -> np.ndarray:
    """(M,) mean over the n rows of the L1 distance between each head's and ``proba``'s vectors.

    Args:
        heads: M trained heads; X: (n, d) float32 rows on the heads' device; proba: (n, C) M_D's.
    """
    M, C = heads.n_models, proba.shape[1]
    target = torch.as_tensor(proba, dtype=torch.float64, device=X.device)
    total = torch.zeros(M, dtype=torch.float64, device=X.device)
    with torch.no_grad():
        for sl in _row_blocks(len(proba), M, C):
            p = predict_proba(heads, X[sl])  # (M, b, C)
            total += (p - target[sl].unsqueeze(0)).abs().sum(dim=2).sum(dim=1)
    return (total / len(proba)).cpu().numpy()


def label_confidences(heads: StackedHeads, X: torch.Tensor, y: np.ndarray) -> np.ndarray:
    """(n, M) p_y(x) of every head on rows X (n, d) with labels y (n,)."""
    M, n = heads.n_models, len(y)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64, device=X.device)
    out = np.empty((n, M), np.float64)
    with torch.no_grad():
        for sl in _row_blocks(n, M, int(heads.biases[-1].shape[1])):
            p = predict_proba(heads, X[sl])  # (M, b, C)
            idx = yt[sl].view(1, -1, 1).expand(M, -1, 1)
            out[sl] = p.gather(2, idx).squeeze(2).T.cpu().numpy()
    return out


def retrain_distances(recipe: HeadRecipe, n_classes: int, X: np.ndarray, y: np.ndarray, proba: np.ndarray,
                      orders: np.ndarray, u1: np.ndarray, u2: np.ndarray, seeds: np.ndarray, *,
                      max_models: int = MAX_MODELS, device: torch.device | str = "cpu") -> np.ndarray:
    """Distances of the two mocks of every LTU round to M_D (Pedersen et al. 2022, Theorem 3).

    Round k trains mock j ∈ {1, 2} on the training order ``orders[k]`` with ``u_j[k]`` placed in
    its −1 slot, all mocks of ``max_models // 2`` rounds in one batched call.

    Args:
        recipe: the defender's batched recipe (for ``n_D = orders.shape[1]`` training rows).
        n_classes: C. X: (n, d) attack-table features; y: (n,) labels; proba: (n, C) M_D's.
        orders: (N, n_D) table rows in T_D's training order, exactly one −1 (the hidden slot) per row.
        u1, u2: (N,) candidate rows. seeds: (N,) per-round seeds (from the attacker's generator).
        max_models: at most this many mocks per batched call (>= 2).
        device: where to train.

    Returns:
        (N, 2) mean L1 distances on all n rows of the two mocks' probabilities to ``proba``.
    """
    _check_max_models(max_models, 2)
    orders = np.array(orders, dtype=np.int64, copy=True)
    N = len(orders)
    if orders.ndim != 2 or N != len(u1) or N != len(u2) or N != len(seeds):
        raise ValueError(f"orders {orders.shape}, u1 {np.shape(u1)}, u2 {np.shape(u2)} and seeds "
                         f"{np.shape(seeds)} must describe the same number of rounds")
    holes = (orders < 0).sum(1)
    if N and not np.all(holes == 1):
        bad = int(np.flatnonzero(holes != 1)[0])
        raise ValueError(f"training order of round {bad} has {int(holes[bad])} hidden slots, expected 1")
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device)
    out = np.empty((N, 2), np.float64)
    per_call = int(max_models) // 2
    for start in range(0, N, per_call):
        ks = np.arange(start, min(N, start + per_call))
        rows = np.repeat(orders[ks], 2, axis=0)  # (2R, n_D): mock j of round k at 2k + j
        slot = np.argmax(rows < 0, axis=1)
        rows[np.arange(len(rows)), slot] = np.stack([np.asarray(u1)[ks], np.asarray(u2)[ks]], axis=1).ravel()
        heads = train_mock_heads(recipe, X, y, rows, n_classes, chunk_generator(np.asarray(seeds)[ks], device),
                                 device)
        out[ks] = proba_distances(heads, Xt, proba).reshape(-1, 2)
    return out


def reference_confidences(recipe: HeadRecipe, n_classes: int, X: np.ndarray, y: np.ndarray,
                          subsets: list[np.ndarray], seeds: np.ndarray, *, max_models: int = MAX_MODELS,
                          device: torch.device | str = "cpu") -> np.ndarray:
    """p_y(x) of K reference models (LiRA offline (Carlini et al. 2022); RMIA), batched.

    Args:
        recipe: the defender's batched recipe (for the subset size).
        n_classes: C. X: (n, d) features; y: (n,) labels.
        subsets: K equal-size arrays of rows, each in training order (sorted = data order).
        seeds: (K,) per-model seeds (from the attacker's generator).
        max_models: at most this many models per batched call (>= 1).
        device: where to train.

    Returns:
        (n, K) confidence of every row's label under each reference model.
    """
    _check_max_models(max_models, 1)
    K = len(subsets)
    if K != len(seeds):
        raise ValueError(f"{K} subsets but {len(seeds)} seeds")
    sizes = {len(s) for s in subsets}
    if len(sizes) != 1:
        raise ValueError(f"reference subsets must all have the same size, got sizes {sorted(sizes)}")
    rows = np.stack([np.asarray(s, np.int64) for s in subsets])
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32, device=device)
    conf = np.empty((len(y), K), np.float64)
    for start in range(0, K, int(max_models)):
        ks = np.arange(start, min(K, start + int(max_models)))
        heads = train_mock_heads(recipe, X, y, rows[ks], n_classes, chunk_generator(np.asarray(seeds)[ks], device),
                                 device)
        conf[:, ks] = label_confidences(heads, Xt, y)
    return conf


def batched_recipe(spec: DefenderSpecBase | None, n_train: int, n_classes: int) -> HeadRecipe | None:
    """The spec's batched recipe for ``n_train`` training rows, or None (sklearn kinds: joblib path)."""
    if spec is None:
        return None
    from privaudit.defenders.recipes import recipe_from_spec

    return recipe_from_spec(spec, n_train, n_classes)
