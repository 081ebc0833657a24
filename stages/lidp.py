"""Stage lidp: LiDP ε lower bounds → ``data/audit/lidp.json`` and ``data/audit/epsilon_vs_trials/<defender>.csv``
(the generic audit stage, ``stages/_audit.py``). ``--self-check EPS``: audit a Gaussian mechanism with known ε."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from privaudit.config import Params
from privaudit.seeding import rng_for
from stages._audit import audit_arguments, audit_body, audit_stage
from stages._runner import run_stage

if TYPE_CHECKING:
    from privaudit.audits.lidp_self_check import SelfCheckResult

# the self-check's modules (pandas, scipy) are imported where it runs: the audit stage's start-up pays for none of them


def self_check_result(params: Params, epsilon: float, dim: int, level: float | None = None,
                      trials: int | None = None) -> SelfCheckResult:
    """The self-check at ``level`` (default ``gate.beta``, the whole error budget: it audits one mechanism)
    over ``trials`` simulated trial pairs (default :data:`~privaudit.audits.lidp_self_check.SELF_CHECK_TRIALS`;
    ``lidp.trials`` is sized for trained models: far too few here)."""
    from privaudit.audits.lidp import LidpSettings
    from privaudit.audits.lidp_self_check import SELF_CHECK_TRIALS, gaussian_self_check
    from privaudit.audits.protocol import settings_from

    trials = SELF_CHECK_TRIALS if trials is None else trials
    if trials < 2:
        raise ValueError(f"--trials must be at least 2 (got {trials}); the default is {SELF_CHECK_TRIALS}")
    # the lidp block with the self-check's trials, validated (K = auto follows them)
    lp = type(params.lidp).model_validate({**params.lidp.model_dump(), "trials": trials})
    rng = rng_for(params.base.seed, "lidp", "self_check")
    return gaussian_self_check(epsilon, settings=settings_from(LidpSettings, lp), delta=lp.delta,
                               level=params.gate.beta if level is None else level, trials=lp.trials,
                               canaries=lp.k_canaries(), null_canaries=lp.m_null(), dim=dim, rng=rng)


#: the ε̂-vs-trials curves (read by the report's plots)
CURVES = Path("data/audit/epsilon_vs_trials")


def _self_check_args(p: argparse.ArgumentParser) -> None:
    from privaudit.audits.lidp_self_check import SELF_CHECK_TRIALS

    audit_arguments("lidp", CURVES)(p)
    p.add_argument("--self-check", type=float, default=None, metavar="EPS",
                   help="audit a Gaussian mechanism with known epsilon EPS instead (writes nothing)")
    p.add_argument("--dim", type=int, default=100_000, help="self-check: dimension of the mechanism")
    p.add_argument("--level", type=float, default=None,
                   help="self-check: failure probability of the bound (default: gate.beta)")
    p.add_argument("--trials", type=int, default=SELF_CHECK_TRIALS,
                   help="self-check: simulated trial pairs (lidp.trials is for trained models; too few here)")


def _body(args: argparse.Namespace, params: Params) -> None:
    """Algorithm 1 of Pillutla et al. with tau chosen honestly, at each defender's own delta and budget."""
    if args.self_check is None:
        return audit_body("lidp")(args, params)
    if args.level is not None and not 0.0 < args.level < 1.0:
        raise ValueError(f"--level must be in (0, 1), got {args.level}")
    result = self_check_result(params, args.self_check, args.dim, args.level, args.trials)
    print(result.summary())
    return result.raise_if_failed()


if __name__ == "__main__":
    if "--self-check" in sys.argv:
        sys.exit(run_stage("lidp", _self_check_args, _body))
    sys.exit(audit_stage("lidp", tables=CURVES))
