"""A stage process ends right after its work (stages._runner.end_process): the interpreter's teardown of the
preloaded libraries took 1.6-2.3 s a process on 2 cores and did nothing a stage needs. What a normal exit does
that matters still happens: every line printed reaches a pipe, atexit handlers run, the exit code is the
stage's, and a running non-daemon thread is waited for (then the exit is a normal one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TOY = '''
import atexit, sys, threading, time
from pathlib import Path
from stages._runner import run_stage

out = Path(sys.argv.pop(1))
mode = sys.argv.pop(1)


class Torn:
    def __del__(self):  # runs only in the interpreter's teardown
        (out / "torn_down").write_text("yes")


KEEP = Torn()


def args(p):
    pass


def body(a, params):
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    for i in range(20000):
        print(f"line {i}")  # a pipe's buffer, never flushed by the stage
    if mode == "fail":
        raise ValueError("bad input named here")
    if mode == "thread":
        def late():
            time.sleep(0.5)
            (out / "thread").write_text("done")
        threading.Thread(target=late).start()


sys.exit(run_stage("toy", args, body))
'''


def _run(tmp_path: Path, mode: str, interpreter: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "toy_stage.py"
    script.write_text(TOY)
    return subprocess.run([sys.executable, *interpreter, str(script), str(tmp_path), mode, "--params",
                           str(REPO / "params.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{REPO}:{REPO / 'src'}", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("mode, code", [("ok", 0), ("fail", 1)])
def test_a_stage_ends_at_once_with_its_code_its_output_and_its_atexit_handlers(tmp_path: Path, mode: str,
                                                                            code: int) -> None:
    done = _run(tmp_path, mode)
    assert done.returncode == code, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 20000 and lines[-1] == "line 19999"  # nothing lost in the pipe's buffer
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "torn_down").exists()  # no teardown: the process ended at once
    if code:
        assert "stage toy failed: bad input named here" in done.stderr


def test_a_stage_that_leaves_a_thread_running_exits_normally_after_it(tmp_path: Path) -> None:
    done = _run(tmp_path, "thread")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "atexit").read_text() == "ran"


def test_a_stage_under_cprofile_exits_normally_so_that_the_profile_is_written(tmp_path: Path) -> None:
    """``python -m cProfile -o FILE`` (``bench_scale.py --profile``) writes its file after the script returns: an
    ``os._exit`` inside the stage lost every profile."""
    out = tmp_path / "stage.prof"
    done = _run(tmp_path, "ok", ("-m", "cProfile", "-o", str(out)))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
    import pstats

    assert any("body" in func[2] for func in pstats.Stats(str(out)).stats)  # type: ignore[attr-defined]
    assert (tmp_path / "atexit").read_text() == "ran"
