"""Progress of long loops over fits: a tqdm bar on a terminal, one line per finished piece (shard, reference
model) in logs, CI and Prefect runs; both with an ETA once it can be known.

**The ETA** (:meth:`FitProgress.eta`). The first piece of a stage pays one-off costs (imports, a worker's
start, a trainer's first call: a user trainer computing σ with opacus's accountant took 6.2 s on its first
fit against 0.017 s after), so it is left out of the rate; and no ETA is shown ("ETA --") before at least
:data:`ETA_MIN_SHARE` of the work is done (planned seconds where pieces are planned, else units) and one piece
after the first has finished. Pieces of one stage
can differ by orders of magnitude in cost per unit (a batched trainer fits a thousand models in the time a
sklearn fit takes a hundred), so each piece may carry its *planned* seconds (the plan stage's estimate,
:mod:`privaudit.planning.cost`): the rate is then measured in planned seconds per second, and the ETA is
the planned seconds still to do over that rate. Without plans every unit weighs the same.

**Pieces on parallel workers** (``workers``): each worker's first piece pays that worker's start-up, and the
first ``workers`` pieces run side by side and end close together, so no ETA is shown before a piece after those
has ended, and those first pieces are left out of the rate. Where each piece reports the seconds it took in its
own process (``advance(..., seconds=)``), the rate is work per busy second of one process, times ``workers``; else
work per wall second since the ``workers``-th piece ended. Counting wall time from the first piece's end (as for one
worker) credited the second worker's whole piece to a fraction of a second: the default audit's canaries stage
(2 workers) printed "ETA 0:01" with 15.7 s to go.

**The pieces' queue** (``queue``: each piece's key and planned seconds in the order the workers take them, as
:func:`privaudit.canaries.shards.dispatch_order` hands them out). Then the ETA is the pool's finish time, not the
work left over the worker count: the first ``workers`` pieces start with the progress, each later one when a piece
ends; a running piece is expected to take its planned seconds times the measured rate, less the seconds it has
already run; the queued pieces go, in order, to whichever worker is free first; the ETA is when the last one ends.
Work over workers counted each running piece as not started and ignored that the last pieces cannot share a worker:
at 10 000 × 128 × 10 the canaries stage printed "ETA 0:11" with 3 s to go (its MLP shard had run 16 of its 18 s on
the other worker; ``benchmarks/bench_scale.py`` scores every ETA line of a run against the time its work took).

**Lanes** (``lanes``: several such queues, each with its own workers). On CUDA the canaries stage trains the batched
kinds' shards one after the other on the GPU in its own process while worker processes fit the sequential kinds'
shards: two pools that share nothing. Each lane is a pool as above, with its own rate (its pieces after its first
``workers``; the rate of all pieces until it has one); the ETA is when the last lane ends. Counted as one pool of
all the workers, the GPU's queue was spread over 17 processes: the sixth H200 lease's 50 000 × 512 canaries stage
printed "ETA 0:04" with 17 s to go (3.56×).

**Groups** (``group``: a piece's key -> its group; the canaries stage's defenders). One plan can err differently for
different trainers in one lane: on the seventh H200 lease's 50 000 × 512 canaries stage the GPU lane's MLP shards ran
2.0-2.8× their plan and its DP-SGD shards 0.7-1.1×; the lane's one rate, learnt on the MLP shards, was applied to the
DP-SGD ones ("ETA 1:16" with 31 s to go, 2.38×). So a piece's rate is the geometric mean of what its group's counted
pieces say and what the lane's other groups' say, with the plan (a rate of 1) standing in for a group that has none
yet, and the group's own rate where no other group has one. For a group not yet seen, the square root of the others'
rate is the minimax choice (multiplicatively) between "its plan holds" and "it errs as the others did"; for a group
seen, its few pieces (a one-trial Game-3 shard first) are a noisy guide alone: on the sixth lease the DP-SGD Game-3
shard ran 13.6× its plan, its black-box shards 3.3×. Modelled on both leases' progress lines
(``tests/planning/test_progress.py``) every line is then within 1.6× on the seventh (2.38× with one rate per lane) and
within 1.3× on the sixth once a DP-SGD shard has run; the sixth's first two lines, before any DP-SGD shard and with
those running eagerly at 6-14× their plan, are off 3.4× and 3.9× (3.0× and 3.5× with one rate per lane): no rate
learnt from the MLP shards meets both leases there. "The plan held" must read 1 for this, so each piece's planned
seconds are those of the process that runs it (:func:`privaudit.planning.timings.planned_piece_seconds`), not its
share of the stage's wall: with the share, on 2 workers every piece read ~2 where its plan held, and a defender not
yet seen was taken for ~0.6 of its time (at 10 000 × 128 on 2 cores, "ETA 0:17" with 27 s to go).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

__all__ = ["ETA_MIN_SHARE", "FitProgress", "no_monitor_thread", "terminal"]

#: no ETA before this share of the work (planned seconds, else units) is done
ETA_MIN_SHARE = 0.1


def no_monitor_thread() -> None:
    """Stop tqdm from starting its monitor thread in this process (``tqdm.monitor_interval = 0``, tqdm's own switch).

    Every tqdm bar starts that thread, disabled ones too (Great Expectations opens one per validation), and it
    lives while any bar does; a process with it running cannot safely fork
    (:func:`privaudit.repro.worker_pool.fork_refusal`), so every later worker pool would start loky's fresh
    interpreters (seconds each). The monitor only lowers a bar's refresh rate when updates are slow; privaudit's
    bars do not need it. Stage processes call this at their start (``stages/_runner.py``)."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0


def terminal() -> bool:
    """Whether progress should be a bar: stderr is a terminal and ``CI`` is unset (logs get lines)."""
    import os

    return sys.stderr.isatty() and not os.environ.get("CI")


@dataclass
class _Lane:
    """One pool of ``workers`` taking its ``waiting`` pieces in order (module docstring: the queue, lanes)."""

    workers: int
    planned: dict[Hashable, float]
    waiting: list[Hashable]
    running: dict[Hashable, float] = field(default_factory=dict)  # start times of the pieces running
    pieces: int = 0  # pieces finished
    busy: float = 0.0  # the own seconds of its pieces after its first ``workers``, and their planned seconds
    busy_work: float = 0.0
    # the same per group of pieces (module docstring: groups): group -> [own seconds, planned seconds]
    by_group: dict[Hashable, list[float]] = field(default_factory=dict)

    def take(self, slots: int, now: float) -> None:
        """Start the next ``slots`` waiting pieces now."""
        for _ in range(slots):
            if self.waiting:
                self.running[self.waiting.pop(0)] = now

    def count(self, group: Hashable, seconds: float, work: float) -> None:
        """A finished piece after the lane's first ``workers``: its own seconds and planned seconds."""
        self.busy += seconds
        self.busy_work += work
        mine = self.by_group.setdefault(group, [0.0, 0.0])
        mine[0] += seconds
        mine[1] += work

    def rate_of(self, group: Hashable, fallback: float) -> float:
        """Seconds per planned second for a piece of ``group`` (module docstring: groups): the geometric mean of
        its group's measured ratio (1, the plan, while the group has no counted piece) and the other groups' of
        this lane; the group's own ratio where no other group has one; ``fallback`` (all lanes' ratio) while the
        lane has no counted piece."""
        if self.busy_work <= 0:
            return fallback
        seconds, work = self.by_group.get(group, (0.0, 0.0))
        others, others_work = self.busy - seconds, self.busy_work - work
        if others_work <= 0:
            return seconds / work
        return ((seconds / work if work > 0 else 1.0) * others / others_work) ** 0.5

    def finish(self, rate: Callable[[Hashable], float], now: float) -> float:
        """Seconds until its last piece ends: running pieces at their planned seconds × their ``rate`` less what they
        have run (at least a twentieth of it: one that overran is not taken as done), then the waiting ones in order
        on the first free worker."""
        free = []
        for key, began in self.running.items():
            expect = self.planned[key] * rate(key)
            free.append(max(expect / 20, expect - (now - began)))
        free += [0.0] * max(0, self.workers - len(free))
        for key in self.waiting:
            k = min(range(len(free)), key=free.__getitem__)
            free[k] += self.planned[key] * rate(key)
        return max(free, default=0.0)


class FitProgress:
    """Count finished work units of ``total``; ``advance(n, what)`` after each piece.

    With ``bar`` a tqdm bar shows the count and the ETA (and a line per piece is not printed); without it each
    piece prints ``<desc>: <what> done; k of N <unit>s, rate, ETA h:mm:ss`` to ``out`` (``print`` by default,
    so Prefect's log capture sees it), ``ETA --`` while it cannot be known (module docstring).

    Args:
        planned_seconds: the planned seconds of all ``total`` units (the sum of what each piece passes to
            :meth:`advance`); ``None``: every unit weighs the same.
        workers: how many pieces run at once (local worker processes; module docstring).
        queue: every piece as ``(key, planned seconds)`` in the order the workers take them (module docstring);
            each :meth:`advance` then names its piece (``piece=key``). Needs ``planned_seconds``.
        lanes: instead of ``queue``, several pools as ``(workers, queue)`` (module docstring); their workers add
            up to ``workers``.
        group: a queue's piece key -> its group (e.g. a shard's defender): each group's pieces get their own rate
            within a lane (module docstring: groups); ``None``: one rate per lane.
        clock: injectable for tests.
    """

    def __init__(self, desc: str, total: int, unit: str, *, bar: bool, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, planned_seconds: float | None = None,
                 workers: int = 1, queue: Sequence[tuple[Hashable, float]] | None = None,
                 lanes: Sequence[tuple[int, Sequence[tuple[Hashable, float]]]] | None = None,
                 group: Callable[[Hashable], Hashable] | None = None) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if planned_seconds is not None and not planned_seconds >= 0:
            raise ValueError(f"planned_seconds must be >= 0 or None, got {planned_seconds}")
        if queue is not None and lanes is not None:
            raise ValueError("give a progress one queue or lanes of queues, not both")
        if lanes is not None and (any(w < 1 for w, _ in lanes) or sum(w for w, _ in lanes) != workers):
            raise ValueError(f"the lanes' workers ({[w for w, _ in lanes]}) must each be >= 1 and add up to "
                             f"workers={workers}")
        lanes = [(workers, queue)] if queue is not None else lanes
        if group is not None and lanes is None:
            raise ValueError("group= sorts the pieces of a queue: give the progress a queue or lanes too")
        if lanes is not None and planned_seconds is None:
            raise ValueError("a progress with a queue of pieces needs planned_seconds (the pieces' sum)")
        keys = [k for _, q in lanes or () for k, _ in q]
        if len(set(keys)) != len(keys):
            raise ValueError("the pieces of a queue must have distinct keys")
        if any(not sec >= 0 for _, q in lanes or () for _, sec in q):
            raise ValueError("every piece of a queue needs planned seconds >= 0")
        self.desc, self.total, self.unit, self.done = desc, int(total), unit, 0
        self._out, self._clock, self._start = out, clock, clock()
        self._planned_total = planned_seconds
        self._planned_done = 0.0
        self._pieces, self._workers = 0, int(workers)
        self._first: tuple[float, float] | None = None  # (time, work done) when the workers-th piece ended
        self._busy = self._busy_work = 0.0  # the later pieces' own seconds and their work (advance's seconds)
        # the queue's pools (module docstring), each piece's lane by its key; None: no queue
        self._lanes = None if lanes is None else [
            _Lane(int(w), {k: float(sec) for k, sec in q}, [k for k, _ in q]) for w, q in lanes]
        self._lane_of = {k: lane for lane in self._lanes or () for k in lane.planned}
        self._group: Callable[[Hashable], Hashable] = group if group is not None else lambda key: None
        for lane in self._lanes or ():
            lane.take(lane.workers, self._start)
        self._bar = None
        if bar and total:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=out or sys.stderr,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {postfix}]", postfix="ETA --")

    def eta(self) -> float | None:
        """Seconds still to go, or ``None`` while they cannot be known (module docstring)."""
        total = self._planned_total if self._planned_total is not None else float(self.total)
        done = self._planned_done if self._planned_total is not None else float(self.done)
        if self._first is None or self._pieces <= self._workers or done < ETA_MIN_SHARE * total:
            return None
        if self._busy_work > 0 and self._lanes is not None:
            now, rate, group = self._clock(), self._busy / self._busy_work, self._group
            return max(lane.finish(lambda key, lane=lane: lane.rate_of(group(key), rate), now) for lane in self._lanes)
        if self._busy_work > 0:  # the pieces' own seconds: one process's speed, times the processes at once
            return max(0.0, total - done) * self._busy / self._busy_work / self._workers
        t_first, w_first = self._first
        elapsed, work = self._clock() - t_first, done - w_first
        if not (elapsed > 0 and work > 0):
            return None
        return max(0.0, total - done) * elapsed / work

    def advance(self, n: int, what: str = "", planned: float | None = None, seconds: float | None = None,
                piece: Hashable | None = None) -> None:
        """Record ``n`` more finished units (``what``: the piece, e.g. ``mine blackbox 0-32``; ``planned``: its
        planned seconds, when the progress was given ``planned_seconds``; ``seconds``: what the piece took in the
        process that ran it, which makes the rate one of work per busy second, whatever ran beside it; ``piece``:
        its key in the ``queue``, when the progress was given one)."""
        lane = None
        if self._lanes is not None:
            if piece not in self._lane_of:
                raise ValueError(f"this progress was given a queue of pieces: name the finished one (piece=), not {piece!r}")
            lane = self._lane_of[piece]
            if lane.running.pop(piece, None) is None and piece in lane.waiting:
                lane.waiting.remove(piece)  # ended before the queue's order said it would start
            else:
                lane.take(1, self._clock())  # its worker takes the next piece
            lane.pieces += 1
        self.done += int(n)
        self._pieces += 1
        if self._planned_total is not None:
            if planned is None:
                raise ValueError("this progress was given planned_seconds: pass each piece's planned seconds")
            self._planned_done += float(planned)
        work = float(planned) if self._planned_total is not None else float(n)
        if seconds is not None and self._pieces > self._workers:
            self._busy += float(seconds)
            self._busy_work += work
        if seconds is not None and lane is not None and lane.pieces > lane.workers:
            lane.count(self._group(piece), float(seconds), work)
        if self._pieces == self._workers:
            self._first = (self._clock(), self._planned_done if self._planned_total is not None else float(self.done))
        left = self.eta()
        eta = "ETA --" if left is None else f"ETA {_clock_text(left)}"
        if self._bar is not None:
            self._bar.set_postfix_str(eta, refresh=False)
            self._bar.update(n)
            return
        elapsed = self._clock() - self._start
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        print(f"{self.desc}: {what + ' done; ' if what else ''}{self.done} of {self.total} {self.unit}s, "
              f"{_rate(rate, self.unit)}, {eta}", file=self._out or sys.stdout, flush=True)

    def __enter__(self) -> "FitProgress":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.close()


def _rate(rate: float, unit: str) -> str:
    if rate == float("inf"):
        return f"- {unit}s/s"
    return f"{rate:.3g} {unit}s/s" if rate >= 1 else f"{1 / rate:.3g} s/{unit}" if rate > 0 else f"0 {unit}s/s"


def _clock_text(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour) of ``seconds`` rounded, and never ``0:00`` while any time is left: a last
    piece that overran its plan is still running (at 10 000 × 128 on 2 cores the canaries stage printed "ETA 0:00"
    with 1.7 s to go)."""
    s = max(int(round(seconds)), 1 if seconds > 0 else 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
