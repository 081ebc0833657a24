"""Deterministic kernels for the stages that train or embed on a device (see docs/determinism.md).

On CPU every privaudit computation is bitwise deterministic given ``base.seed`` (numpy/torch
generators derived by :mod:`privaudit.seeding`, fixed torch thread counts in the stage
runner), so nothing global needs switching. On CUDA some kernels (atomics in scatter/index_add,
cuBLAS split-K reductions, cuDNN autotuning) are not; :func:`configure_determinism` turns on
torch's deterministic algorithms, which either run a deterministic kernel or raise
``RuntimeError`` naming the operation — never silently return a different result.

This is process-global torch state, so only stage glue calls it (never library code).
"""

from __future__ import annotations

import os
from typing import Any

CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_VALUE = ":4096:8"  # documented by NVIDIA/PyTorch for deterministic cuBLAS (CUDA >= 10.2)
GPU_RTOL = 1e-5
"""Documented tolerance between a CUDA run and a CPU run of the same params (float32 maths
in a different order); two CUDA runs on the same GPU model, driver and torch are bitwise equal."""


def determinism_settings(device: str) -> dict[str, Any]:
    """What :func:`configure_determinism` would set for ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:<i>"``).

    Returns:
        ``{"deterministic_algorithms": bool, "cudnn_deterministic": bool, "cudnn_benchmark": bool,
        "env": {name: value}}``; on CPU nothing is changed (empty env, algorithms flag False).
    """
    if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"base.device must resolve to 'cpu' or 'cuda[:<index>]', got {device!r}")
    if device == "cpu":
        return {"deterministic_algorithms": False, "cudnn_deterministic": False, "cudnn_benchmark": False, "env": {}}
    return {"deterministic_algorithms": True, "cudnn_deterministic": True, "cudnn_benchmark": False,
            "env": {CUBLAS_ENV: CUBLAS_VALUE}}


def configure_determinism(device: str) -> dict[str, Any]:
    """Apply :func:`determinism_settings` to this process (call before any CUDA work).

    ``CUBLAS_WORKSPACE_CONFIG`` is only set if the user has not set it (their choice wins
    as long as it is one of the two deterministic values ``:4096:8`` / ``:16:8``; another
    value raises ``ValueError`` naming it).

    Returns:
        The settings applied.
    """
    settings = determinism_settings(device)
    if not settings["deterministic_algorithms"]:
        return settings
    current = os.environ.get(CUBLAS_ENV)
    if current is None:
        os.environ[CUBLAS_ENV] = CUBLAS_VALUE
    elif current not in (":4096:8", ":16:8"):
        raise ValueError(f"environment {CUBLAS_ENV}={current!r} makes cuBLAS non-deterministic on "
                         f"base.device={device!r}; unset it or use ':4096:8'")
    settings["env"] = {CUBLAS_ENV: os.environ[CUBLAS_ENV]}
    import torch

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    return settings
