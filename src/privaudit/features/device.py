"""Resolve ``base.device`` (``auto`` | ``cpu`` | ``cuda`` | ``cuda:<index>``) to a torch device string."""

from __future__ import annotations

import re

DEVICE_SETTINGS: tuple[str, ...] = ("auto", "cpu", "cuda")


def resolve_device(setting: str) -> str:
    """The device to run on for the ``base.device`` setting.

    ``"auto"`` → ``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``;
    ``"cpu"`` → ``"cpu"``; ``"cuda"`` / ``"cuda:<i>"`` → itself when that GPU exists.

    Raises:
        ValueError: unknown setting, or CUDA asked for but not available; the message names
            ``base.device`` and the value.
    """
    if not isinstance(setting, str):
        raise ValueError(f"base.device must be one of {list(DEVICE_SETTINGS)}, got {setting!r}")
    value = setting.strip().lower()
    if value == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", value)
    if value != "auto" and match is None:
        raise ValueError(f"base.device must be one of {list(DEVICE_SETTINGS)} (or 'cuda:<index>'), got {setting!r}")

    import torch

    available = torch.cuda.is_available()
    if value == "auto":
        return "cuda" if available else "cpu"
    if not available:
        raise ValueError(
            f"base.device={setting!r} but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); use 'auto' or 'cpu'"
        )
    if match is not None and match.group(1) is not None and int(match.group(1)) >= torch.cuda.device_count():
        raise ValueError(
            f"base.device={setting!r} but only {torch.cuda.device_count()} CUDA device(s) are visible"
        )
    return value
