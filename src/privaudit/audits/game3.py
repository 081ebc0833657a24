"""The Game-3 audit (Malek et al. 2021, "Antipodes of Label Differential Privacy: PATE and ALIBI", App. B).

The canaries stage trains each audited defender with mislabeled canaries (a label change: the
``replace_label`` neighbourhood); the abstaining adversary (:mod:`privaudit.attacks.game3`) guesses
each canary's trained label; Theorem B.1 (ε ≥ log((p − δ)/(1 − p)),
:func:`privaudit.stats.epsilon_from_accuracy`) turns a Clopper-Pearson interval of its accuracy into
an ε interval (:func:`game3_interval`). :func:`run` is the audit protocol
(:mod:`privaudit.audits.protocol`): at the defender's share of ``gate.beta`` and the claim's δ for a
label change (group privacy for add/remove claims).

τ is chosen honestly over the grid ``[game3.tau_min, game3.tau_max]`` (``game3.tau_selection``):

* ``bonferroni`` (default): every τ of the T-point grid gets its interval at level/T per end on all
  canaries and the largest lower end wins (:func:`privaudit.stats.bonferroni_max`, a union bound),
  so no canary is spent on tuning — better than a split when T is small (10 by default);
* ``split``: τ is picked on a random half of the canaries, the interval certified on the other half.

(The paper reports the best τ on all canaries "omitting corrections for multiple hypothesis
testing"; we do not.) ACGR (all C−2 alternatives, reliability-weighted) gets the same treatment;
its interval (:func:`privaudit.stats.acgr_interval`) is valid for a bounded mean (the more
conservative of a Student-t interval and Clopper-Pearson on the effective number of canaries).

Error budget: :func:`game3_interval` takes ``level``, the failure probability of each one-sided
bound it reports: each ``eps_low`` (Clopper-Pearson and ACGR) fails with probability at most
``level`` (after the Bonferroni correction), so every reported interval is two-sided at
``alpha = 2 × level``; it reports both (``alpha``, ``level``). :func:`run` hands it the defender's
share of ``gate.beta``.

With ``game3.runs`` > 1 (Table 5: 10 runs × 100 canaries vs 1 × 1000) the canaries of all runs are
pooled; :func:`game3_interval` also reports the per-run intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.attacks.game3 import acgr_counts, game3_guesses
from privaudit.audits.protocol import AuditBound, AuditInputs, AuditRequest
from privaudit.stats import acgr_epsilon, bonferroni_max, game3_epsilon
from privaudit.canaries.stats_files import CANARY_FILES, read_canary_stats

__all__ = ["CITATION", "SETTINGS", "Game3Settings", "game3_interval", "load_game3_stats", "run"]

#: the paper and equation of the bound
CITATION = ("Malek et al. 2021, 'Antipodes of Label Differential Privacy: PATE and ALIBI', App. B, Game 3 and "
            "Theorem B.1 (ε ≥ log((p − δ)/(1 − p))), Clopper-Pearson interval of the adversary's accuracy")

#: what the Game-3 adversary sees
THREAT_MODEL = "black-box: final model's class probabilities on the canaries"


@dataclass(frozen=True)
class Game3Settings:
    """The ``game3.*`` params the audit reads: the τ grid and how one τ is chosen."""

    tau_min: float
    tau_max: float
    tau_steps: int
    tau_selection: str


#: this audit's settings type (:func:`privaudit.audits.protocol.settings_from`)
SETTINGS = Game3Settings


def load_game3_stats(path: Path) -> dict[str, np.ndarray]:
    """The Game-3 statistics of one defender (``canary_index``, ``true_label``, ``label_pair``, ``bit``, ``proba``),
    validated (:func:`privaudit.canaries.stats_files.read_canary_stats`)."""
    return read_canary_stats(path, "game3")


def run(request: AuditRequest, inputs: AuditInputs, settings: Game3Settings) -> AuditBound:
    """The Game-3 interval of one audited defender (the audit protocol, :mod:`privaudit.audits.protocol`).

    Reads ``<canaries>/<name>/game3.npz`` (validated by the GX ``canaries`` suite); ``settings`` is
    the ``game3`` params block (``tau_min``, ``tau_max``, ``tau_steps``, ``tau_selection``); the
    defender draws from ``rng_for(base.seed, "game3", name)``.
    """
    stats = load_game3_stats(inputs.need_canaries_dir("game3") / request.name / CANARY_FILES["game3"])
    taus = np.linspace(settings.tau_min, settings.tau_max, settings.tau_steps)
    delta = request.delta(Neighbourhood.REPLACE_LABEL, default=0.0)
    # eps_low is a one-sided lower bound failing with probability <= the budget share
    r = game3_interval(stats, taus, request.rng("game3"), settings.tau_selection, level=request.level, delta=delta)
    if stats["proba"].shape[1] == 2:
        # C = 2: the label-flip game (privaudit.canaries.batched_runs.game3_draw) has no C - 2
        # alternative labels, so ACGR does not exist: reported as null
        r["acgr"] = None
    r.update(level=request.level, delta=delta, neighbourhood=Neighbourhood.REPLACE_LABEL)
    r.update(detectable_game3(request.claim_for(Neighbourhood.REPLACE_LABEL), stats, settings, level=request.level, delta=delta))
    acgr = (f"ACGR [{r['acgr']['eps_low']:.3f}, {r['acgr']['eps_high']:.3f}]" if r["acgr"] is not None
            else "ACGR n/a (2 classes: label-flip game)")
    lines = [f"game3: {request.name}: eps in [{r['eps_low']:.3f}, {r['eps_high']:.3f}] (CP, tau={r['tau']:.2f}), {acgr}"]
    lines += [f"game3: {request.name}: run {i}: eps in [{pr['eps_low']:.3f}, {pr['eps_high']:.3f}]"
              for i, pr in enumerate(r.get("per_run", []))]
    return AuditBound(epsilon=r["eps_low"], level=request.level, delta=delta, neighbourhood=Neighbourhood.REPLACE_LABEL,
                      threat_model=THREAT_MODEL, diagnostics=r, lines=tuple(lines))


def detectable_game3(claim: Any, stats: dict[str, np.ndarray], settings: Game3Settings, *, level: float,
                     delta: float) -> dict[str, Any]:
    """``detectable_epsilon`` of the Game-3 bound at its size: every canary of every run guessed by an ideal
    adversary of ε-label randomized response, at the level the interval uses (Bonferroni over the τ grid, or the
    certification half with ``tau_selection: split``; :func:`privaudit.stats.detectable.detectable_epsilon_game3`).
    ``None`` without a finite claim."""
    import math

    from privaudit.stats.detectable import detectable_epsilon_game3

    if claim is None or not math.isfinite(claim.epsilon):
        return {"detectable_epsilon": None}
    n = int(np.asarray(stats["bit"]).size)
    split = settings.tau_selection == "split"
    level_t = level / (1 if split else max(1, int(settings.tau_steps)))
    eps = detectable_epsilon_game3(claimed_epsilon=float(claim.epsilon), guesses=max(1, n // 2 if split else n),
                                   level=level_t, delta=delta)
    return {"detectable_epsilon": eps if math.isfinite(eps) else None,
            "detectable_meaning": "smallest true label epsilon this audit's canaries detect with probability >= 0.8 "
                                  "for an ideal adversary that guesses every canary: a lower bound on what a real "
                                  "trainer needs (privaudit.stats.detectable)"}


def _cp(correct: np.ndarray, guessed: np.ndarray, t: int, level: float, delta: float = 0.0) -> tuple[float, float]:
    """CP ε interval at threshold index ``t``, each end failing with probability ``level``. Under (ε, δ)-DP
    a canary's guess is right with probability ≤ e^ε/(1+e^ε) + δ (per game); among the g of N canaries
    guessed, the rate excess is at most δ N / g, which is the δ handed to Theorem B.1
    (:func:`epsilon_from_accuracy`)."""
    g = int(guessed[t].sum())
    if g == 0:
        return 0.0, float("inf")
    return game3_epsilon(int(correct[t].sum()), g, delta=min(1.0, delta * guessed.shape[1] / g), level=level)


def _acgr(proba: np.ndarray, true: np.ndarray, trained: np.ndarray, tau: float, level: float,
          delta: float = 0.0) -> tuple[float, float]:
    """ACGR ε interval (finite lower end: the interval never has zero width, see acgr_interval);
    δ scaled by the share of alternatives guessed, as in :func:`_cp`."""
    c_i, g_i = acgr_counts(proba, true, trained, tau)
    if g_i.sum() == 0:
        return 0.0, float("inf")
    total = len(true) * max(1, proba.shape[1] - 2)
    return acgr_epsilon(c_i, g_i, delta=min(1.0, delta * total / float(g_i.sum())), level=level)


def game3_interval(run: dict[str, np.ndarray], taus: np.ndarray, rng: np.random.Generator,
                   tau_selection: str = "bonferroni", *, level: float, delta: float = 0.0) -> dict[str, Any]:
    """ε interval of the Game-3 canaries with an honestly chosen τ (see the module docstring).

    Args:
        run: ``proba (N, C)``, ``label_pair (N, 2)``, ``bit (N,)``, ``true_label (N,)`` and, with
            several runs, ``run (N,)``.
        taus: (T,) threshold grid in [0.5, 1].
        rng: draws the random half/half split of ``tau_selection="split"``.
        tau_selection: ``"bonferroni"`` or ``"split"`` (see the module docstring).
        level: failure probability of each one-sided bound reported, in (0, 0.5): each ``eps_low``
            (``P(ε < eps_low) <= level``, after the Bonferroni correction) and each ``eps_high``;
            each reported interval is two-sided at ``alpha = 2 * level``.
        delta: the δ of the (ε, δ) claim the bounds are for (label-change neighbourhood); 0 = pure ε.
    Returns:
        ``{eps_low, eps_high, canaries, certified_canaries, tau, guesses, correct, alpha, level,
        level_per_threshold, acgr: {eps_low, eps_high, tau}, tau_selection, runs, per_run?}``;
        ``alpha = 2 * level`` and ``level_per_threshold`` is the one-sided level each τ candidate
        was certified at (``level / T`` with Bonferroni).
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)) \
            or not 0.0 < float(level) < 0.5:
        raise ValueError(f"level (one-sided) must lie in (0, 0.5), got {level!r}")
    level = float(level)
    proba, pair, bit, true = run["proba"], run["label_pair"], run["bit"], run["true_label"]
    n = len(bit)
    if tau_selection not in ("bonferroni", "split"):
        raise ValueError(f"game3.tau_selection must be 'bonferroni' or 'split', got {tau_selection!r}")
    if tau_selection == "split" and n < 4:
        raise ValueError(f"game3.canaries must be >= 4 to tune and certify on separate halves, got {n}")
    trained = pair[np.arange(n), bit]
    guessed, correct = game3_guesses(proba, pair, bit, taus)
    if tau_selection == "bonferroni":
        cert = np.arange(n)
        T = len(taus)
        low, t_best = bonferroni_max(lambda t, a: _cp(correct, guessed, t, a, delta)[0], list(range(T)), level=level)
        eps_low, eps_high = _cp(correct, guessed, t_best, level / T, delta)
        a_low, tau_a = bonferroni_max(lambda t, a: _acgr(proba, true, trained, t, a, delta)[0],
                                      [float(t) for t in taus], level=level)
        acgr_low, acgr_high = _acgr(proba, true, trained, tau_a, level / T, delta)
        how = f"max over {T} thresholds, each interval at alpha/{T} (Bonferroni) on all {n} canaries"
    else:
        perm = rng.permutation(n)
        tune, cert = perm[: n // 2], perm[n // 2:]
        t_best = int(np.argmax([_cp(correct[:, tune], guessed[:, tune], t, level, delta)[0]
                                if guessed[t, tune].any() else -1.0 for t in range(len(taus))]))
        eps_low, eps_high = _cp(correct[:, cert], guessed[:, cert], t_best, level, delta)
        tau_a = float(taus[t_best])
        acgr_low, acgr_high = _acgr(proba[cert], true[cert], trained[cert], tau_a, level, delta)
        how = "tau tuned on a random half of the canaries, interval certified on the other half"
    out: dict[str, Any] = {
        "eps_low": eps_low, "eps_high": eps_high, "canaries": n, "certified_canaries": int(len(cert)),
        "tau": float(taus[t_best]), "guesses": int(guessed[t_best, cert].sum()),
        "correct": int(correct[t_best, cert].sum()), "alpha": 2.0 * level, "level": level,
        "level_per_threshold": level / (len(taus) if tau_selection == "bonferroni" else 1),
        "acgr": {"eps_low": acgr_low, "eps_high": acgr_high, "tau": tau_a},
        "tau_selection": how, "runs": 1, "delta": delta,
    }
    if "run" in run and len(np.unique(run["run"])) > 1:
        runs = np.unique(run["run"])
        out["runs"] = int(len(runs))
        out["per_run"] = [
            {k: v for k, v in game3_interval({key: run[key][run["run"] == r] for key in
                                           ("proba", "label_pair", "bit", "true_label")},
                                          taus, rng, tau_selection, level=level, delta=delta).items()
             if k in ("eps_low", "eps_high")}
            for r in runs]
    return out
