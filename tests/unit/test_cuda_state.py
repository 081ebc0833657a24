"""A process that initialised the CUDA driver without torch's lazy init (``torch.cuda.is_available()``) gives forked
children that cannot use the GPU (seventh H200 lease: ``CUDA error: initialization error``): the driver itself is
asked (``privaudit.repro.cuda_state``), and worker pools for CUDA work are not forked then. Checked here with a
stand-in driver library that answers as the CUDA driver API does before and after ``cuInit``; on a GPU with the real
one."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from privaudit.repro import cuda_state
from privaudit.repro import worker_pool as wp

_STAND_IN = textwrap.dedent("""
    static int initialised = 0;
    int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
    int cuDeviceGetCount(int *count) {  /* CUDA_ERROR_NOT_INITIALIZED (3) before cuInit, as the driver API */
        if (!initialised) return 3;
        *count = 1;
        return 0;
    }
""")


@pytest.fixture
def stand_in_driver(tmp_path: Path) -> Path:
    """A shared library with the driver API's ``cuInit`` and ``cuDeviceGetCount``, not yet loaded."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) on PATH to build the stand-in CUDA driver library")
    src, lib = tmp_path / "driver.c", tmp_path / "libstandin_cuda.so"
    src.write_text(_STAND_IN)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    return lib


def test_a_driver_not_loaded_here_was_not_initialised(stand_in_driver: Path) -> None:
    assert not cuda_state.cuda_driver_initialised(str(stand_in_driver))  # looking does not load it
    assert not cuda_state.cuda_driver_initialised(str(stand_in_driver))
    assert not cuda_state.cuda_driver_initialised("libprivaudit-no-such-library.so")


@pytest.fixture
def no_other_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fork_refusal`` sees no other thread (a test run's tqdm monitor or pytest-xdist's would come first)."""
    monkeypatch.setattr(wp.threading, "active_count", lambda: 1)


def test_the_driver_answers_whether_cuinit_ran(stand_in_driver: Path, no_other_thread, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    driver = ctypes.CDLL(str(stand_in_driver))
    assert not cuda_state.cuda_driver_initialised(str(stand_in_driver))
    monkeypatch.setattr(cuda_state, "CUDA_DRIVER_LIBRARY", str(stand_in_driver))
    assert not cuda_state.cuda_initialised()
    assert "CUDA driver" not in (wp.fork_refusal("cuda") or "")
    driver.cuInit(0)
    assert cuda_state.cuda_driver_initialised() and cuda_state.cuda_initialised()
    refusal = wp.fork_refusal("cuda:0")
    assert refusal is not None and "CUDA driver" in refusal and "cuda:0" in refusal
    assert "CUDA driver" not in (wp.fork_refusal("cpu") or "")  # workers on the CPU never touch the GPU


def test_cuda_work_is_not_forked_from_a_process_whose_driver_is_initialised(stand_in_driver: Path, no_other_thread,
                                                                            monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``fork_only`` work on ``cuda`` then stays in this process; on the CPU it may still be forked."""
    ctypes.CDLL(str(stand_in_driver)).cuInit(0)
    monkeypatch.setattr(cuda_state, "CUDA_DRIVER_LIBRARY", str(stand_in_driver))
    forked: list[object] = []
    monkeypatch.setattr(wp, "_forked", lambda *a, **k: forked.append(a) or iter(()))
    assert list(wp.map_in_processes(_double, [(i,) for i in range(3)], 2, fork_only=True, device="cuda")) == [0, 2, 4]
    assert not forked
    list(wp.map_in_processes(_double, [(i,) for i in range(3)], 2, fork_only=True, device="cpu"))
    assert forked, "workers on the CPU are forked as before"


def _double(x: int) -> int:
    return 2 * x


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (the real driver)")
def test_is_available_initialises_the_real_driver_and_forked_cuda_work_is_refused() -> None:
    """On a GPU, in a fresh process: after ``torch.cuda.is_available()`` torch does not count CUDA as initialised, the
    driver does, and a pool of CUDA workers is not forked."""
    code = textwrap.dedent("""
        import torch
        from privaudit.repro import cuda_state, worker_pool
        before = cuda_state.cuda_driver_initialised()
        assert torch.cuda.is_available()
        print(before, torch.cuda.is_initialized(), cuda_state.cuda_driver_initialised(),
              worker_pool.fork_refusal("cuda") is not None, worker_pool.fork_refusal("cpu") is None)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "True", "True", "True"], out
