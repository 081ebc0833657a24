"""Benchmark: honest false-alarm rate of the white-box audit, batched observer (issue 27).

Every audit pools ``--runs`` honest DP-SGD runs (3 by default: the pipeline's release run plus
``whitebox.runs`` = 2 audit runs) of a ``dp_sgd`` linear head on 200 × 8 Gaussian blobs (3
classes), observed by :class:`privaudit.train.observe.HeadsObserver` (the batched trainer,
:func:`privaudit.train.train_heads`; one ``train_heads`` call trains the runs of ``--chunk`` audits),
and estimates ε̂ with :func:`privaudit.stats.whitebox.estimate_whitebox` (Nasr et al. 2023 threat
model; ε̂ = the PRV lower end of the composition at the χ² / Clopper-Pearson bounds) at ``--level``.
The claim is what the defender records: the accountant's ε for the σ it calibrated. An audit is a
false alarm when ε̂ > claim or a model check fails; an honest audit must show a rate ≤ level within
binomial noise (``level + 3 s.e.`` is printed).

Rows: constant σ calibrated and claimed with PRV (epochs 5, batch 20), the same with RDP (the
estimator still bounds the true ε, which RDP over-states), expected batch size 2 (epochs 2,
many empty Poisson batches; PRV), the PRV row's σ claimed with dp_accounting's PLD accountant (a
tighter number for the same mechanism: 0.984 against PRV's 0.994; needs the ``pld`` extra), and
opacus's own schedulers in an opacus loop with the hook (``src/privaudit/testing/planted/opacus_loops.py``,
:func:`privaudit.audits.whitebox.whitebox_audit`): ``ExponentialNoise`` (σ·0.8^epoch) and
``ExponentialGradClip`` (C·0.8^epoch), each claimed with opacus's PRV accountant on the schedule's
own history. The schedule rows are not batched (one opacus run at a time) and a heterogeneous PRV
composition costs about 1.5 s, so they take ``--workers`` processes.

Run:  PRIVAUDIT_TORCH_THREADS=1 nice python benchmarks/bench_whitebox_false_alarms.py [--audits 1000]
      [--out benchmarks/results/whitebox_false_alarms.txt]

Cost (timed with ``--audits 20``, 1 torch thread, on the 2-core x86-64 dev box shared with another
job, load ≈ 3): 0.32 s per audit (PRV row), 0.17 s (RDP), 0.45 s (batch 2), i.e. about 16 minutes
for the three rows at 1000 audits each. The other three at 1000 audits (``--rows 3,5,4 --workers 2``,
the same box while it also ran ``dvc repro`` and tests): PLD 337 s, ExponentialGradClip 435 s and
ExponentialNoise 2581 s of wall time (two heterogeneous PRV compositions per audit, about 1.5 s
each, dominate it). ``--rows`` picks rows (separate processes in parallel on a larger machine).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # privaudit.testing.planted

from privaudit.compat.opacus_warnings import opacus_noise_filtered  # noqa: E402
from privaudit.defenders.dp_sgd import accountant_epsilon, noise_multiplier  # noqa: E402
from privaudit.defenders.registry import validate_defender_spec  # noqa: E402
from privaudit.seeding import int_seed  # noqa: E402
from privaudit.stats.whitebox import estimate_whitebox  # noqa: E402
from privaudit.train import TrainData, train_heads  # noqa: E402
from privaudit.train.observe import HeadsObserver  # noqa: E402
from privaudit.defenders.recipes import recipe_from_spec  # noqa: E402
from privaudit.testing.planted.opacus_bugs import tiny_data  # noqa: E402
from privaudit.audits.whitebox import python_trainer, whitebox_audit  # noqa: E402


@dataclass(frozen=True)
class Row:
    """One honest recipe: its name, accountant, expected batch size and epochs; ``trainer`` is
    ``"heads"`` (the batched trainer) or an opacus loop variant of ``privaudit.testing.planted.opacus_loops``;
    ``claim_accountant`` is the accountant the claim is computed with (default: ``accountant``)."""

    name: str
    accountant: str
    batch_size: int
    epochs: int
    epsilon: float = 1.0
    delta: float = 1e-5
    trainer: str = "heads"
    claim_accountant: str | None = None


ROWS = (
    Row("constant sigma, PRV claim", "prv", 20, 5),
    Row("constant sigma, RDP claim", "rdp", 20, 5),
    Row("batch size 2, PRV claim", "prv", 2, 2),
    Row("constant sigma, dp_accounting PLD claim", "prv", 20, 5, claim_accountant="pld"),
    Row("opacus ExponentialNoise schedule, PRV claim", "prv", 20, 5, trainer="noise_schedule"),
    Row("opacus ExponentialGradClip schedule, PRV claim", "prv", 20, 5, trainer="clip_schedule"),
)


def pld_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """ε of ``steps`` Poisson-subsampled Gaussian steps by dp_accounting's PLD accountant
    (Google's ``dp_accounting.pld.PLDAccountant``, add-or-remove-one, pessimistic estimate, value
    discretisation 1e-4): the claim of a user who accounts with dp_accounting instead of opacus.
    The accountant composes privacy loss distributions by FFT (Koskela, Jälkö & Honkela 2020,
    "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS) with the pessimistic
    discretisation of Doroshenko et al. 2022 ("Connect the Dots", PoPETs, §3), so its ε is an upper
    bound on the true ε of the mechanism."""
    try:
        from dp_accounting import dp_event, pld
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit("the PLD row needs dp_accounting (in the test extra; or pip install -e '.[pld]')") from e
    acc = pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    return float(acc.get_epsilon(delta))


@dataclass(frozen=True)
class RowResult:
    row: Row
    sigma: float
    claim: float
    audits: int
    flagged: int
    eps_hat_median: float
    seconds: float

    @property
    def rate(self) -> float:
        return self.flagged / self.audits

    def limit(self, level: float) -> float:
        """level + 3 binomial standard errors."""
        return level + 3 * math.sqrt(level * (1 - level) / self.audits)


def _loop_audits(row: Row, indices: range, runs: int, level: float, seed: int, canary_scale: float,
                 claim: float) -> list[tuple[bool, float]]:
    """(false alarm, ε̂) of the opacus-loop audits ``indices`` of ``row`` (one worker process)."""
    from privaudit.testing.planted.opacus_loops import LOOPS

    torch.set_num_threads(int(os.environ.get("PRIVAUDIT_TORCH_THREADS", "1")))
    warnings.filterwarnings("ignore")
    X, y = tiny_data(n=200)
    trainer = python_trainer(LOOPS[row.trainer].train, 3)
    out = []
    for a in indices:
        res = whitebox_audit(trainer, X, y, runs=runs, delta=row.delta, level=level, accountant=row.accountant,
                             seed=int_seed(seed, row.name, a), canary_scale=canary_scale)
        out.append((bool(res.overclaims(claim)), float(res.epsilon)))
    return out


def run_loop_row(row: Row, n: int, *, audits: int, runs: int, level: float, seed: int, canary_scale: float,
                 workers: int) -> RowResult:
    """An opacus-loop row: ``audits`` calls of ``whitebox_audit`` split over ``workers`` processes."""
    from concurrent.futures import ProcessPoolExecutor

    from privaudit.testing.planted.opacus_loops import claimed_epsilon, recipe as loop_recipe

    claim = claimed_epsilon(row.trainer, n)
    sigma = float(loop_recipe(n)["sigma"])
    t0 = time.perf_counter()
    parts = [range(w, audits, workers) for w in range(workers)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = [r for part in pool.map(_loop_audits, [row] * workers, parts, [runs] * workers,
                                          [level] * workers, [seed] * workers, [canary_scale] * workers,
                                          [claim] * workers) for r in part]
    flagged = sum(f for f, _ in results)
    return RowResult(row, sigma, claim, audits, flagged, float(np.median([e for _, e in results])),
                     time.perf_counter() - t0)


def run_row(row: Row, X: np.ndarray, y: np.ndarray, *, audits: int, runs: int, chunk: int, level: float,
            seed: int, canary_scale: float, workers: int = 1) -> RowResult:
    n = len(y)
    if row.trainer != "heads":
        return run_loop_row(row, n, audits=audits, runs=runs, level=level, seed=seed, canary_scale=canary_scale,
                            workers=workers)
    spec = validate_defender_spec({"name": "bench", "kind": "dp_sgd", "epsilon": row.epsilon, "delta": row.delta,
                                   "epochs": row.epochs, "batch_size": row.batch_size, "lr": 0.5,
                                   "max_grad_norm": 1.0, "accountant": row.accountant})
    recipe = recipe_from_spec(spec, n)
    sigma = noise_multiplier(spec, n)
    if row.claim_accountant == "pld":
        claim = pld_epsilon(sigma, spec.sample_rate(n), spec.steps(n), row.delta)
    else:
        claim = accountant_epsilon(sigma, spec.sample_rate(n), spec.steps(n), row.delta, row.accountant)
    t0 = time.perf_counter()
    flagged, eps_hats, done, c = 0, [], 0, 0
    Xt, yt = torch.tensor(X), torch.tensor(y)
    while done < audits:
        k = min(chunk, audits - done)
        observer = HeadsObserver(seed=int_seed(seed, row.name, "canary", c), canary_scale=canary_scale)
        gen = torch.Generator().manual_seed(int_seed(seed, row.name, "train", c))
        train_heads(recipe, TrainData(Xt, yt, n_models=k * runs), 3, gen, observer=observer)
        obs = observer.runs(dataset_size=n)
        for a in range(k):
            with opacus_noise_filtered(row.accountant):
                res = estimate_whitebox(obs[a * runs:(a + 1) * runs], dataset_size=n, delta=row.delta, level=level,
                                        accountant=row.accountant, canary_scale=canary_scale)
            flagged += bool(res.overclaims(claim))
            eps_hats.append(res.epsilon)
        done += k
        c += 1
    return RowResult(row, sigma, claim, audits, flagged, float(np.median(eps_hats)), time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--audits", type=int, default=1000, help="audits per row")
    ap.add_argument("--runs", type=int, default=3, help="runs pooled per audit (release run + whitebox.runs)")
    ap.add_argument("--chunk", type=int, default=100, help="audits whose runs one train_heads call trains")
    ap.add_argument("--level", type=float, default=0.05)
    ap.add_argument("--canary-scale", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=2027)
    ap.add_argument("--workers", type=int, default=1, help="processes for the opacus-loop rows")
    ap.add_argument("--rows", type=str, default="", help="comma-separated row indices (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("PRIVAUDIT_TORCH_THREADS", "1")))
    warnings.filterwarnings("ignore", message="Optimal order")
    X, y = tiny_data(n=200)
    rows = [ROWS[int(i)] for i in args.rows.split(",")] if args.rows else list(ROWS)
    lines = [f"# white-box audit false alarms (honest DP-SGD; batched observer, opacus hook for the opacus-loop rows); machine: {platform.platform()}, "
             f"{os.cpu_count()} CPU cores, torch {torch.__version__} ({torch.get_num_threads()} thread), python "
             f"{platform.python_version()}",
             f"# 200 x 8 blobs, 3 classes, lr 0.5, C 1, delta 1e-5, claim eps 1 (the accountant's eps for the "
             f"calibrated sigma); {args.runs} runs pooled per audit; level {args.level}; canary scale "
             f"{args.canary_scale}; seed {args.seed} (row streams int_seed(seed, row, 'train'|'canary', chunk); opacus-loop rows "
             f"audit a seeds whitebox_audit with int_seed(seed, row, a))",
             "row | accountant | batch | epochs | sigma | claim | audits | flagged | rate | level + 3 s.e. | "
             "median eps_hat | seconds | seconds per audit"]
    print("\n".join(lines), flush=True)
    for row in rows:
        r = run_row(row, X, y, audits=args.audits, runs=args.runs, chunk=args.chunk, level=args.level,
                    seed=args.seed, canary_scale=args.canary_scale, workers=args.workers)
        line = (f"{row.name} | {row.accountant} | {row.batch_size} | {row.epochs} | {r.sigma:.4f} | {r.claim:.4f} | "
                f"{r.audits} | {r.flagged} | {r.rate:.4f} | {r.limit(args.level):.4f} | {r.eps_hat_median:.4f} | "
                f"{r.seconds:.0f} | {r.seconds / r.audits:.3f}")
        print(line, flush=True)
        lines.append(line)
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
