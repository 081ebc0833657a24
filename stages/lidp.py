"""Stage lidp: Lifted-DP ε lower bounds; merges Game 3 into ``metrics/audit.json``.

Also writes ``data/audit/epsilon_vs_trials/<defender>.csv`` (trials, eps_k1, eps_ksqrt).
``python -m stages.lidp --self-check EPS`` instead audits the Gaussian mechanism with known ε
(LiDP §4) through the same audit code and prints ε̂ next to the true ε.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import atomic_dir, ensure_writable, read_json, write_json
from privaudit.attacks.lidp_audit import lidp_audit
from privaudit.audit_metrics import assemble_entry, audit_delta
from privaudit.claim_check import claim_of
from privaudit.config import Params
from privaudit.mechanisms import gaussian_mechanism_sigma, simulate_gaussian_scores
from privaudit.seeding import rng_for
from privaudit.validation import validate_canary_stats, validate_metrics
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--canaries", type=Path, default=Path("data/canaries"))
    p.add_argument("--game3", type=Path, default=Path("data/audit/game3.json"))
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--out", type=Path, default=Path("metrics/audit.json"))
    p.add_argument("--curves", type=Path, default=Path("data/audit/epsilon_vs_trials"))
    p.add_argument("--whitebox", type=Path, default=None, help="white-box audit results (data/audit/whitebox.json)")
    p.add_argument("--one-run", type=Path, default=None, help="one-run audit results (data/audit/one_run.json)")
    p.add_argument("--self-check", type=float, default=None, metavar="EPS",
                   help="audit a Gaussian mechanism with known epsilon EPS instead (writes nothing)")
    p.add_argument("--dim", type=int, default=100_000, help="self-check: dimension of the mechanism")


def self_check(params: Params, epsilon: float, dim: int) -> dict[str, float]:
    """LiDP §4: run :func:`lidp_audit` on Gaussian-mechanism scores with known (ε, lidp.delta)."""
    lp = params.lidp
    sigma = gaussian_mechanism_sigma(epsilon, lp.delta)
    rng = rng_for(params.base.seed, "lidp", "self_check")
    sx, sy = simulate_gaussian_scores(sigma, lp.trials, lp.k_canaries(), dim, rng, lp.m_null())
    # the mechanism's statistic <theta, c> is larger for members; lidp_audit takes losses (lower = member)
    res, _ = lidp_audit(-sx, -sy, delta=lp.delta, beta=lp.beta, order=lp.order, method=lp.method,
                        tune_fraction=lp.tune_fraction, n_thresholds=lp.tau_quantiles, rng=rng,
                        tau_selection=lp.tau_selection)
    return {"epsilon": epsilon, "eps_lower_bound": res["eps_lower_bound"], "eps_lower_bound_k1": res["eps_lower_bound_k1"],
            **{f"by_order.{k}": v for k, v in res["by_order"].items()}}


def _load_stats(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run the canaries stage)")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    validate_canary_stats("lidp", arrays)  # GX suite 'canaries' on the input
    if "loss_in" in arrays:
        return arrays["loss_in"], arrays["loss_null"]
    return arrays["stat_in"], arrays["stat_null"]


def _body(args: argparse.Namespace, params: Params) -> None:
    """Algorithm 1 of Pillutla et al. with tau chosen honestly, at each defender's own delta and budget."""
    lp = params.lidp
    if args.self_check is not None:
        r = self_check(params, args.self_check, args.dim)
        print(f"lidp self-check: Gaussian mechanism with eps={r['epsilon']:g}, delta={lp.delta:g}: "
              f"eps_hat={r['eps_lower_bound']:.3f} (K={lp.k_canaries()}, order {lp.order} {lp.method}), "
              f"K=1 {r['eps_lower_bound_k1']:.3f}; "
              + ", ".join(f"{k.split('.')[1]} {v:.3f}" for k, v in r.items() if k.startswith("by_order")))
        if r["eps_lower_bound"] > r["epsilon"]:
            raise ValueError(f"self-check failed: eps_hat {r['eps_lower_bound']:.3f} exceeds the true eps {r['epsilon']}")
        return
    ensure_writable(args.out, args.curves)
    game3 = read_json(args.game3)
    extra = {key: (read_json(path) if path is not None else {}) for key, path in
             (("whitebox", args.whitebox), ("one_run", args.one_run))}
    audited = {s.name for s in params.audited_defenders()}
    audit = {}
    with atomic_dir(args.curves) as curves:
        for spec in params.defenders:
            name = spec.name
            info = read_json(args.defenders / name / "info.json")
            budget = params.error_budget(name)
            claim = claim_of(info, f"{args.defenders / name}/info.json")
            blocks = {key: extra[key].get(name) for key in extra}
            if name in audited:
                loss_in, loss_null = _load_stats(args.canaries / name / "lidp.npz")
                delta = audit_delta(claim, lp.neighbourhood, lp.delta)
                res, curve = lidp_audit(loss_in, loss_null, delta=delta, beta=budget.level("lidp"), order=lp.order,
                                        method=lp.method, tune_fraction=lp.tune_fraction,
                                        n_thresholds=lp.tau_quantiles, rng=rng_for(params.base.seed, "lidp", name),
                                        tau_selection=lp.tau_selection, neighbourhood=lp.neighbourhood)
                res.update(canary_type=lp.canary_type, level=budget.level("lidp"))
                blocks.update(lidp=res, game3=game3[name])
                curve.to_csv(curves / f"{name}.csv", index=False)
            audit[name] = assemble_entry(info, budget, name=name, audited=name in audited, blocks=blocks)
            shown = ", ".join(f"{k} {b['eps_lower_bound' if 'eps_lower_bound' in b else 'eps_low']:.3f}"
                              for k, b in blocks.items() if b)
            print(f"lidp: {name}: eps lower bounds {shown or 'none'}; claimed eps {info.get('claimed_epsilon')}; "
                  f"violation {audit[name]['violation']}")
        validate_metrics("audit", audit)
    write_json(args.out, audit)


if __name__ == "__main__":
    sys.exit(run_stage("lidp", _args, _body))
