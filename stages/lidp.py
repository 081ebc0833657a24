"""Stage lidp: LiDP ε lower bounds, merged with Game 3, white-box and one-run into ``metrics/audit.json``;
``data/audit/epsilon_vs_trials/<defender>.csv``. ``--self-check EPS``: audit a Gaussian mechanism with known ε."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable, read_json, write_json
from privaudit.audit_metrics import build_audit_metrics
from privaudit.config import Params
from privaudit.lidp_audit import LidpSettings
from privaudit.lidp_self_check import SELF_CHECK_TRIALS, SelfCheckResult, gaussian_self_check
from privaudit.seeding import rng_for
from privaudit.validation import validate_metrics
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
    p.add_argument("--trials", type=int, default=SELF_CHECK_TRIALS,
                   help="self-check: simulated trial pairs (lidp.trials is for trained models; too few here)")


def self_check_result(params: Params, epsilon: float, dim: int, trials: int = SELF_CHECK_TRIALS) -> SelfCheckResult:
    if trials < 2:
        raise ValueError(f"--trials must be at least 2 (got {trials}); the default is {SELF_CHECK_TRIALS}")
    # the lidp block with the self-check's trials, validated (K = auto follows them)
    lp = type(params.lidp).model_validate({**params.lidp.model_dump(), "trials": trials})
    rng = rng_for(params.base.seed, "lidp", "self_check")
    return gaussian_self_check(epsilon, settings=LidpSettings.of(lp), delta=lp.delta, beta=lp.beta, trials=lp.trials,
                               canaries=lp.k_canaries(), null_canaries=lp.m_null(), dim=dim, rng=rng)


def _body(args: argparse.Namespace, params: Params) -> None:
    """Algorithm 1 of Pillutla et al. with tau chosen honestly, at each defender's own delta and budget."""
    if args.self_check is not None:
        result = self_check_result(params, args.self_check, args.dim, args.trials)
        print(result.summary())
        return result.raise_if_failed()
    ensure_writable(args.out, args.curves)
    names = [s.name for s in params.defenders]
    built = build_audit_metrics(
        names, audited={s.name for s in params.audited_defenders()}, defenders_dir=args.defenders,
        budgets={n: params.error_budget(n) for n in names}, canaries_dir=args.canaries, game3=read_json(args.game3),
        extra={k: read_json(p) if p else {} for k, p in (("whitebox", args.whitebox), ("one_run", args.one_run))},
        lidp=LidpSettings.of(params.lidp), default_delta=params.lidp.delta, seed=params.base.seed)
    print("\n".join(built.lines))
    validate_metrics("audit", built.entries)
    with atomic_dir(args.curves) as curves:
        built.write_curves(curves)
    write_json(args.out, built.entries)


if __name__ == "__main__":
    sys.exit(run_stage("lidp", _args, _body))
