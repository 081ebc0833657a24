"""Regressions between audit runs: a gated ε̂ that rises beyond what the earlier runs' spread explains.

For each record and each gated bound of a defender (same defender, same bound kind, e.g. ``one_run``, and the
same data set identity: a run on other people's data starts its own series, as scheduled runs that switch between a
validated drop and ``params.yaml``'s data set would otherwise compare the two), with ``x_1 … x_n`` the finite ε̂ of
that bound in the **earlier** records of that series (n ≥ 1):

    flag  iff  ε̂ > m + max(3·s, REL·m, ABS),    m = median(x),  s = 1.4826·median(|x − m|)

``s`` is the median absolute deviation scaled to the standard deviation of a normal sample (a robust
spread: one earlier outlier does not widen it; Hampel 1974, "The influence curve and its role in robust
estimation", JASA 69(346)), and ``m + 3s`` the classic robust outlier fence. The floors matter while
the history is short (with one or two earlier runs ``s`` is 0 or half a difference) or flat (identical
reruns):

- :data:`REL` = 0.5 — ε̂ must rise by more than half the earlier median;
- :data:`ABS` = 0.5 — and by more than 0.5 in ε: near ε̂ = 0 a relative floor means nothing (0 → 0.2
  is a reseeded sample, not a regression).

An ε lower bound is a confidence bound computed from a finite sample, so a rerun with another seed
moves it, by a large *relative* amount where ε̂ is small. The floors were chosen on measurements
(``benchmarks/bench_history_regression.py``, ``benchmarks/results/history_regression.txt``) of the
one-run audit's own estimator (Steinke et al. 2023, :func:`privaudit.stats.one_run.one_run_epsilon_lower_bound`)
on a Gaussian mechanism with 1,000 canaries, σ ∈ {2, 1, 0.8} (honest ε̂ medians 0.52, 1.41, 1.84), with
1, 3 or 8 earlier runs: REL = ABS = 0.5 flags 0.1-1.6 % of honest reruns and 93-100 % of runs whose noise
was halved; REL = 1 flags no honest rerun but misses more than half of the halvings at ε̂ ≈ 1.8 (the
estimator saturates); ABS = 0.25 flags 11 % of honest reruns at ε̂ ≈ 0.5 with one earlier run.

The flag says **what changed** between the previous record and this one (:func:`changes`): the commit
(and the files changed under ``src/``, ``stages/`` where git knows both commits), uncommitted code, the
data set's identity or digest, the params blocks, users' trainer files, and package versions (old → new,
:func:`privaudit.repro.environment.environment_changes`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from privaudit.history.records import AuditRecord
from privaudit.repro.environment import environment_changes

__all__ = ["ABS", "MAD_SCALE", "REL", "SIGMAS", "Regression", "changes", "find_regressions", "threshold"]

#: ε̂ must exceed the earlier median by more than this share of it (see the module doc for the measurement)
REL = 0.5
#: ... and rise by more than this much in ε
ABS = 0.5
#: robust spread multiplier, and the MAD's scale to a normal standard deviation
SIGMAS = 3.0
MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Regression:
    """A flagged gated ε̂: ``record`` is its index in the history, ``earlier`` how many runs it is compared with."""

    record: int
    defender: str
    kind: str
    audit: str
    epsilon: float
    median: float
    spread: float
    threshold: float
    earlier: int
    changes: tuple[str, ...]

    def text(self) -> str:
        """One line: what rose, against what, and what changed."""
        what = "; ".join(self.changes)
        return (f"{self.defender}: {self.kind} ε̂ = {self.epsilon:.3g} > {self.threshold:.3g} (median {self.median:.3g} "
                f"of {self.earlier} earlier run(s), robust spread {self.spread:.3g}); changed: {what}")


def threshold(earlier: Sequence[float], rel: float = REL, abs_: float = ABS) -> tuple[float, float, float]:
    """``(m, s, fence)`` of the earlier ε̂ (finite values, at least one): ``fence = m + max(3s, rel·m, abs)``."""
    m = statistics.median(earlier)
    s = MAD_SCALE * statistics.median(abs(x - m) for x in earlier)
    return m, s, m + max(SIGMAS * s, rel * m, abs_)


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "no commit"


def changes(prev: AuditRecord, cur: AuditRecord,
            changed_files: Callable[[str, str], list[str] | None] | None = None) -> list[str]:
    """What differs between two records, one phrase each (``[]``: nothing recorded changed).

    ``changed_files(old, new)`` may list the code files changed between two commits (the CLI and the stage pass
    one that asks git); ``None`` or a ``None`` answer leaves the list out.
    """
    out: list[str] = []
    if prev.commit != cur.commit:
        files = changed_files(prev.commit, cur.commit) if changed_files and prev.commit and cur.commit else None
        shown = f" ({', '.join(files[:5])}{' …' if len(files) > 5 else ''})" if files else ""
        out.append(f"commit {_short(prev.commit)} → {_short(cur.commit)}{shown}")
    if prev.code_sha256 != cur.code_sha256 and (prev.commit == cur.commit or cur.dirty):
        out.append("uncommitted code under src/, stages/ or dvc.yaml" if cur.dirty else "code under src/, stages/")
    if prev.data.identity != cur.data.identity:
        out.append(f"data identity {prev.data.identity} → {cur.data.identity}")
    if prev.data.digest != cur.data.digest:
        out.append(f"data digest {(prev.data.digest or 'none')[:12]} → {(cur.data.digest or 'none')[:12]}")
    if prev.params_sha256 != cur.params_sha256:
        blocks = sorted(k for k in set(prev.params_blocks) | set(cur.params_blocks)
                        if prev.params_blocks.get(k) != cur.params_blocks.get(k))
        out.append(f"params ({', '.join(blocks)})" if blocks else "params")
    trainers = sorted(k for k in set(prev.user_code) | set(cur.user_code) if prev.user_code.get(k) != cur.user_code.get(k))
    if trainers:
        out.append(f"trainer code of {', '.join(trainers)}")
    packages = environment_changes({"python": prev.python, "packages": prev.packages},
                                   {"python": cur.python, "packages": cur.packages})
    if packages:
        out.append("packages " + ", ".join(packages))
    return out


NOTHING_CHANGED = ("nothing recorded changed (same commit, code, data, params, trainers and packages): "
                   "a fluctuation beyond the earlier spread, or a cause outside the record")


def find_regressions(records: Sequence[AuditRecord], *, rel: float = REL, abs_: float = ABS,
                     changed_files: Callable[[str, str], list[str] | None] | None = None) -> list[Regression]:
    """Every flagged gated ε̂ of ``records`` (oldest first), each compared with the earlier runs of its defender
    and bound kind on the same data set identity (see the module doc)."""
    found: list[Regression] = []
    seen: dict[tuple[str, str, str], list[float]] = {}
    last: dict[str, int] = {}  # data set identity → its latest record so far (what changed is said against it)
    for i, record in enumerate(records):
        before = records[last.get(record.data.identity, i - 1)] if i else record
        last[record.data.identity] = i
        for name, defender in record.defenders.items():
            for bound in defender.eps_hat:
                earlier = seen.setdefault((name, bound.kind, record.data.identity), [])
                if earlier and math.isfinite(bound.epsilon):
                    m, s, fence = threshold(earlier, rel, abs_)
                    if bound.epsilon > fence:
                        what = changes(before, record, changed_files) or [NOTHING_CHANGED]
                        found.append(Regression(record=i, defender=name, kind=bound.kind, audit=bound.audit,
                                                epsilon=bound.epsilon, median=m, spread=s, threshold=fence,
                                                earlier=len(earlier), changes=tuple(what)))
                if math.isfinite(bound.epsilon):
                    earlier.append(bound.epsilon)
    return found
