"""Shared entry point of the stage CLIs: arguments, params, clean error exit.

Expected errors (bad params, bad data, unwritable outputs, failed validation: ``ValueError``
and ``OSError`` with their subclasses) end the process with exit code 1 and a one-paragraph
message naming the stage and the problem (capped by :func:`privaudit.messages.cap`); anything else — a ``KeyError``, ``TypeError`` or
``AttributeError`` is a bug, not bad input — propagates with its traceback. Either way
``dvc repro`` stops at the failing stage.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
from pathlib import Path
from typing import Callable

from privaudit.config import Params, load_params
from privaudit.messages import cap

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError)

#: seconds from this stage process's start to its body (``None``: not a stage process, e.g. a test in-process)
STARTUP_SECONDS: float | None = None


def run_stage(
    name: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    body: Callable[[argparse.Namespace, Params], None],
    argv: list[str] | None = None,
    torch_threads: int | None = None,
) -> int:
    """Parse ``argv``, load ``--params``, run ``body``; return the process exit code.

    ``torch_threads`` sets torch's intra-op CPU threads for stages that train many small
    models, where thread hand-offs cost more than they gain (measured: a 64-unit MLP on digits
    trains 18x faster with one thread on 2 cores) and a fixed count keeps CPU results
    independent of the machine's core count. ``PRIVAUDIT_TORCH_THREADS`` overrides it.
    """
    if os.environ.get("PRIVAUDIT_GPU_PEAK_FILE"):  # benchmarks/bench_scale.py: the stage's peak GPU memory
        atexit.register(_write_gpu_peak, Path(os.environ["PRIVAUDIT_GPU_PEAK_FILE"]))
    parser = argparse.ArgumentParser(prog=f"python -m stages.{name}", description=body.__doc__)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    threads = os.environ.get("PRIVAUDIT_TORCH_THREADS") or torch_threads
    if threads:  # after parsing: ``--help`` and a usage error pay no torch import
        import torch

        torch.set_num_threads(int(threads))
    logging.basicConfig(level=logging.WARNING, format=f"[{name}] %(levelname)s %(name)s: %(message)s")
    from privaudit.progress import no_monitor_thread

    no_monitor_thread()  # a tqdm monitor thread (GX validations start one) would keep worker pools from forking
    from privaudit.defenders.user_errors import UserCodeError

    global STARTUP_SECONDS
    if argv is None:  # a real stage process: its start-up so far (imports, interpreter) is a measurement
        from privaudit.planning.timings import process_seconds

        STARTUP_SECONDS = process_seconds()
    code = 0
    try:
        params = load_params(args.params)
        body(args, params)
    except UserCodeError as err:  # the user's code raised: one line naming defender, file:line, then its frames
        print(f"stage {name} failed: {cap(err.summary)}", file=sys.stderr)
        if err.frames:
            print("the trainer's frames (most recent call last):\n" + err.frames.rstrip(), file=sys.stderr)
        code = 1
    except EXPECTED_ERRORS as err:
        print(f"stage {name} failed: {cap(str(err))}", file=sys.stderr)
        code = 1
    if argv is None:  # a real stage run (not a test calling in-process)
        if code == 0:  # its wall informs the next plan
            _record_wall(name)
        end_process(code)
    return code


def end_process(code: int) -> None:
    """End this stage process now with ``code``: flush the standard streams, run the ``atexit`` handlers (logging's
    flush, temporary directories' finalizers, a GPU peak file), then ``os._exit`` — skipping the interpreter's
    teardown of every module it loaded, which does nothing a stage needs: with the warm server's preloaded
    libraries (torch, Great Expectations, scikit-learn, pandas, opacus) that teardown took 2.8-3.5 s after a
    process's last line on 2 cores, against 0.11-0.17 s this way (``benchmarks/bench_stage_exit.py``,
    ``benchmarks/results/stage_exit_cpu.txt``), and under ``privaudit warm`` 0.5-0.6 s of a forked stage's 1.35 s.
    Returns (a normal exit follows) while another Python thread runs, which a normal exit would wait for, and in
    a process a profiler, tracer or debugger watches (``python -m cProfile -o FILE -m stages.<name>``, as
    ``benchmarks/bench_scale.py --profile`` runs a stage, writes its file after the module returns)."""
    import threading

    if threading.active_count() > 1 or _watched():
        return
    _flush_streams()
    atexit._run_exitfuncs()  # CPython's own runner of the registered handlers, as at a normal exit
    _flush_streams()  # what the handlers printed
    os._exit(code)


def _watched() -> bool:
    """Whether a profiler, tracer or debugger watches this process (``sys.setprofile``/``settrace``, or a tool of
    ``sys.monitoring``: cProfile's since Python 3.12)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(
        monitoring.get_tool(tool) is not None
        for tool in (monitoring.PROFILER_ID, monitoring.DEBUGGER_ID, monitoring.COVERAGE_ID))


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: as a normal exit would, go on
            pass


def _record_wall(name: str) -> None:
    """The stage's wall since its process started, into ``data/.timings/stages.json`` (outside DVC;
    ``privaudit.planning.timings.record_stage_wall``); a measurement, never a reason to fail."""
    from privaudit.planning.timings import DEFAULT_TIMINGS, process_seconds, record_stage_wall

    wall = process_seconds()
    if wall is not None:
        try:
            record_stage_wall(name, wall, DEFAULT_TIMINGS.parent)
        except OSError:
            pass


def _write_gpu_peak(path: Path) -> None:
    """Write ``torch.cuda.max_memory_allocated()`` in bytes to ``path`` (only when the stage used CUDA)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        path.write_text(str(torch.cuda.max_memory_allocated()))


def progress_enabled() -> bool:
    """Progress bars on a terminal, lines in CI and in logs (:func:`privaudit.progress.terminal`)."""
    from privaudit.progress import terminal

    return terminal()
