"""Game-3 runs and LiDP trials of one block, trained together on :mod:`privaudit.train`.

A *block* is a fixed group of consecutive trials (``compute.block_trials``); all its models are
trained in one batched call seeded by ``int_seed(base.seed, "canaries", <experiment>, <defender>,
"block", b)``, while each trial's canaries come from its own ``rng_for(..., <trial>)``. Shards are
whole blocks, so the numbers do not depend on how blocks are grouped into shards or where they run.
"""

from __future__ import annotations


import numpy as np
import torch

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.canaries.designs import CanaryDraw, wrong_labels
from privaudit.features.feature_set import FeatureSet
from privaudit.train import (
    HeadRecipe,
    StackedHeads,
    TrainData,
    cross_entropy_per_model,
    initial_heads,
    predict_proba,
    train_heads,
)


def _t(a: np.ndarray, device: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a), device=device, dtype=dtype)


def _canary_loss(heads: StackedHeads, draw_X: torch.Tensor | None, draw_y: torch.Tensor | None,
                 grads: torch.Tensor | None, init: StackedHeads | None = None,
                 reference: torch.Tensor | None = None) -> torch.Tensor:
    """L_canary per model and canary (M, Q): cross-entropy, or ⟨c, θ_T − θ_0 − Δ_ref⟩ for gradient canaries.

    The auditor runs the training, so it knows θ_0 (grey-box, as in the random-gradient audits of
    Andrew et al., LiDP ref. [2]); subtracting it removes the initialisation's share of the
    variance of ⟨c, θ_T⟩ without changing which canaries were inserted (LiDP App. D.2, eq. 24).
    ``reference`` (P,) is the mean displacement θ_T − θ_0 of canary-free models trained on the
    same data (:func:`reference_displacement`): in a small model the data's own pull on θ
    projects onto a random c with a spread far above the canary's effect; it is the same for
    every trial, so subtracting it keeps R_c a fixed region per canary (eq. 24 with τ shifted by
    ⟨c, Δ_ref⟩) while removing that spread.
    """
    if grads is not None:
        theta = heads.flat() - (init.flat() if init is not None else 0.0)
        if reference is not None:
            theta = theta - reference.unsqueeze(0)
        return torch.bmm(grads, theta.unsqueeze(2)).squeeze(2)
    return cross_entropy_per_model(heads, draw_X, draw_y)


def lidp_block(
    recipe: HeadRecipe, fs: FeatureSet, draws: list[CanaryDraw], k: int, m: int, neighbourhood: str,
    seed: int, device: str, reference: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Raw LiDP statistics of the trials of one block (LiDP Algorithm 1 lines 3-6; App. B.2).

    Args:
        draws: per trial, K + m canaries (first K inserted, last m fresh nulls).
        neighbourhood: ``add_remove`` (θ1 with K canaries, θ0 with the first K−1; nulls on θ0) or
            ``replace_one`` (one model θ1 per trial; nulls on θ1).
        reference: (P,) mean canary-free displacement subtracted from gradient-canary
            statistics (:func:`reference_displacement`), or None.
    Returns:
        ``loss_in`` (t, K) = L_canary(c_k, θ1), ``loss_null`` (t, m) = L_canary(c'_j, θ0 or θ1).
    """
    Xd, yd = fs.defender
    n_t = len(draws)
    pairs = 2 if neighbourhood == Neighbourhood.ADD_REMOVE else 1
    M = n_t * pairs
    gen = torch.Generator(device=device).manual_seed(int(seed))
    is_grad = draws[0].grad is not None
    valid = np.ones((M, k), dtype=bool)
    if pairs == 2:
        valid[1::2, k - 1] = False  # θ0 of each trial: the first K−1 canaries only
    rep = np.repeat(np.arange(n_t), pairs)
    data = TrainData(_t(Xd, device, torch.float32), _t(yd, device, torch.int64), n_models=M)
    if is_grad:
        g = np.stack([d.grad[:k] for d in draws])[rep]
        data.grad_canaries, data.grad_valid = _t(g, device, torch.float32), _t(valid, device)
    else:
        data.X_extra = _t(np.stack([d.X[:k] for d in draws])[rep], device, torch.float32)
        data.y_extra = _t(np.stack([d.y[:k] for d in draws])[rep], device, torch.int64)
        data.extra_valid = _t(valid, device)
    init = initial_heads(recipe, data, fs.n_classes, gen)
    heads = train_heads(recipe, data, fs.n_classes, gen, init=init)
    with torch.no_grad():
        if is_grad:
            allc = _t(np.stack([d.grad for d in draws]), device, torch.float32)  # (t, K+m, P)
            ref = None if reference is None else _t(reference, device, torch.float32)
            loss = _canary_loss(heads, None, None, allc[rep], init, ref)
        else:
            X = _t(np.stack([d.X for d in draws]), device, torch.float32)[rep]
            y = _t(np.stack([d.y for d in draws]), device, torch.int64)[rep]
            loss = _canary_loss(heads, X, y, None)
    loss = loss.double().cpu().numpy()
    theta1 = loss[0::pairs]
    theta_null = loss[1::2] if pairs == 2 else theta1
    return theta1[:, :k], theta_null[:, k:k + m]


def reference_displacement(recipe: HeadRecipe, fs: FeatureSet, n_models: int, seed: int,
                           device: str) -> np.ndarray:
    """Mean θ_T − θ_0 of ``n_models`` canary-free heads on the Defender data, (P,) float64.

    Trained with its own seed, independent of every trial's canaries and training randomness, so
    the regions R_c built from it are fixed before the trials run (LiDP App. D.2, eq. 24).
    """
    Xd, yd = fs.defender
    data = TrainData(_t(Xd, device, torch.float32), _t(yd, device, torch.int64), n_models=n_models)
    gen = torch.Generator(device=device).manual_seed(int(seed))
    init = initial_heads(recipe, data, fs.n_classes, gen)
    heads = train_heads(recipe, data, fs.n_classes, gen, init=init)
    with torch.no_grad():
        return (heads.flat() - init.flat()).double().mean(0).cpu().numpy()


def game3_draw(fs: FeatureSet, n_canaries: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Game-3 canaries of one run: N distinct Defender rows, a label pair (y', y'') and a bit each.

    **C >= 3** — Game 3 of Malek et al. 2021 (App. B, Fig. 4): the pair holds two distinct *wrong*
    labels, drawn uniformly; the model is trained on ``label_pair[bit]`` with a uniform bit.

    **C = 2** — the label-flip game, Game 3 restricted to the only two labels there are: the pair
    is ``(0, 1)`` (one of them is the true label), the model is trained on ``label_pair[bit] = bit``
    for a uniform bit, i.e. each canary keeps its label or has it flipped with probability 1/2.
    The adversary sees the trained model and guesses the bit (the more confident of the two
    labels, abstaining below τ). The two training sets of a canary differ in that one label, so
    they are neighbours under label DP (replace-label); the bit is uniform and independent of
    the data and of the other canaries, so Theorem B.1's argument applies unchanged: an
    ε-label-DP training algorithm gives ``P(correct guess) <= e^ε / (1 + e^ε)`` (for (ε, δ) see
    :func:`privaudit.stats.game3.epsilon_from_accuracy`), and the audit maps the correct-guess
    rate to ε exactly as for C >= 3 (``ε >= log(CGR / (1 − CGR))``). The C − 2 alternative
    labels of ACGR do not exist, so ACGR is not reported (null) for C = 2.

    Returns:
        ``canary_index (N,)`` (sorted Defender rows), ``true_label (N,)``, ``label_pair (N, 2)``,
        ``bit (N,)``. For C >= 3 the random stream is the same as before C = 2 was supported.
    """
    yd = fs.defender[1]
    idx = np.sort(rng.choice(len(yd), size=n_canaries, replace=False))
    if fs.n_classes == 2:
        pair = np.tile(np.array([0, 1], dtype=np.int64), (n_canaries, 1))
    else:
        pair = wrong_labels(yd[idx], fs.n_classes, 2, rng)
    bit = rng.integers(0, 2, size=n_canaries)
    return {"canary_index": idx, "true_label": yd[idx], "label_pair": pair, "bit": bit}


def game3_block(recipe: HeadRecipe, fs: FeatureSet, draws: list[dict[str, np.ndarray]], seed: int,
                device: str) -> np.ndarray:
    """Train one model per Game-3 run (its canaries relabelled) in one batched call.

    Returns the probabilities on each run's canaries, (runs, N, C).
    """
    Xd, yd = fs.defender
    R = len(draws)
    idx = np.stack([d["canary_index"] for d in draws])
    labels = np.stack([d["label_pair"][np.arange(len(d["bit"])), d["bit"]] for d in draws])
    include = np.ones((R, len(yd)), dtype=bool)
    np.put_along_axis(include, idx, False, axis=1)
    data = TrainData(_t(Xd, device, torch.float32), _t(yd, device, torch.int64), n_models=R,
                     include=_t(include, device), X_extra=_t(Xd[idx], device, torch.float32),
                     y_extra=_t(labels, device, torch.int64))
    heads = train_heads(recipe, data, fs.n_classes, torch.Generator(device=device).manual_seed(int(seed)))
    with torch.no_grad():
        return predict_proba(heads, data.X_extra).cpu().numpy()


def clipbkd_labels(recipe: HeadRecipe, fs: FeatureSet, vectors: np.ndarray, alpha: float, seed: int,
                   device: str, n_reference: int = 8) -> np.ndarray:
    """y*(α v_j): the label of highest mean loss over ``n_reference`` canary-free models (LiDP App. D.1)."""
    Xd, yd = fs.defender
    data = TrainData(_t(Xd, device, torch.float32), _t(yd, device, torch.int64), n_models=n_reference)
    heads = train_heads(recipe, data, fs.n_classes, torch.Generator(device=device).manual_seed(int(seed)))
    with torch.no_grad():
        p = predict_proba(heads, _t(alpha * vectors, device, torch.float32))  # (R, p, C)
    return (-torch.log(p.clamp_min(1e-300))).mean(0).argmax(1).cpu().numpy().astype(np.int64)


