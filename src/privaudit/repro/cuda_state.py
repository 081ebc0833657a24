"""Whether this process has initialised CUDA, as a child forked from it would inherit it.

A child forked after its parent initialised the CUDA driver cannot use the GPU: its first CUDA call fails with
``CUDA error: initialization error``. torch counts CUDA as initialised only after its own lazy init
(``torch.cuda.is_initialized()``), but ``torch.cuda.is_available()`` and ``torch.cuda.device_count()`` call the
runtime's ``cudaGetDeviceCount``, which initialises the driver (``cuInit``) without it (PyTorch's CUDA notes,
``PYTORCH_NVML_BASED_CUDA_CHECK``). On the seventh H200 lease white-box runs forked from a process for which
``torch.cuda.is_initialized()`` was ``False`` failed that way (``benchmarks/results/gpu/NVIDIA_H200/
lease7_whitebox_runs_device.txt``). So the driver itself is asked: before ``cuInit`` every driver API call returns
``CUDA_ERROR_NOT_INITIALIZED`` (CUDA Driver API reference, "Initialization"), ``cuDeviceGetCount`` included, and it
initialises nothing. The driver library is looked up only among those already loaded (``RTLD_NOLOAD``): a process
that never loaded it cannot have initialised it, and looking does not load it.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["CUDA_DRIVER_LIBRARY", "cuda_driver_initialised", "cuda_initialised", "torch_cuda_initialised"]

#: the CUDA driver's library, by the soname the CUDA runtime opens
CUDA_DRIVER_LIBRARY = "libcuda.so.1"

_CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_initialised(library: str | None = None) -> bool:
    """Whether this process has initialised the CUDA driver (``cuInit``): ``library`` (default
    :data:`CUDA_DRIVER_LIBRARY`; a stand-in in tests) is loaded here and its ``cuDeviceGetCount`` does not answer
    ``CUDA_ERROR_NOT_INITIALIZED``. ``False`` where it is not loaded (no GPU, or nothing opened it yet) or off
    Linux."""
    if not hasattr(os, "RTLD_NOLOAD"):
        return False
    try:
        driver = ctypes.CDLL(library or CUDA_DRIVER_LIBRARY, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:  # not loaded in this process
        return False
    count = ctypes.c_int(0)
    return int(driver.cuDeviceGetCount(ctypes.byref(count))) != _CUDA_ERROR_NOT_INITIALIZED


def torch_cuda_initialised() -> bool:
    """Whether torch has run its lazy CUDA init in this process (``False`` where torch was never imported: asking
    does not import it)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    return bool(cuda is not None and cuda.is_initialized())


def cuda_initialised(library: str | None = None) -> bool:
    """Whether a child forked from this process now could not use the GPU: torch has initialised CUDA, or something
    (``torch.cuda.is_available()``, a library) has initialised the driver (module docstring)."""
    return torch_cuda_initialised() or cuda_driver_initialised(library)
