"""Import torchvision over a CPU-only torch whose paired torchvision wheel is a CUDA build.

torchvision 0.28.0 is the release paired with torch 2.13.0 and its only wheel is built for
CUDA. On a CPU build of torch its compiled extension (``torchvision/_C.so``) does not load, and
``import torchvision`` then stops in ``torchvision/_meta_registrations.py`` with::

    RuntimeError: operator torchvision::nms does not exist

because that module registers fake (meta) kernels for ``torchvision::nms`` and
``torchvision::qnms`` unconditionally, while every other op's registration is skipped when the
extension is missing. :func:`import_torchvision` imports torchvision normally and, only when
that exact failure happens on a CPU torch, defines the two op *schemas* (no kernels) with
``torch.library`` and imports again.

What works afterwards: ``torchvision.models`` (building, loading state dicts, forward passes),
``torchvision.transforms`` / ``transforms.v2``, ``torchvision.datasets`` and ``utils``.
What does not: the compiled ops (``torchvision.ops.nms``, ``roi_align``, ``deform_conv2d``, …)
and video/image decoding from ``torchvision.io``; they raise torchvision's own
"Couldn't load custom C++ ops" RuntimeError. privaudit uses none of them; check with
:func:`compiled_ops_available`. On a GPU machine (CUDA torch) torchvision imports normally
and nothing here runs.

All privaudit code imports torchvision through :func:`import_torchvision`.
"""

from __future__ import annotations

import threading
from types import ModuleType

import torch

MISSING_OP_MESSAGE = "operator torchvision::nms does not exist"

# Schemas as torchvision's csrc/ops/{nms,quantized/...}.cpp define them.
OP_SCHEMAS: dict[str, str] = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}

_lock = threading.Lock()
_schema_library: torch.library.Library | None = None  # kept alive: dropping it removes the schemas


def import_torchvision() -> ModuleType:
    """``import torchvision``, registering the ``nms``/``qnms`` schemas first when a CPU torch needs it.

    Returns:
        The torchvision module.

    Raises:
        ImportError / RuntimeError: torchvision is missing, or fails for any other reason
            (including this failure on a CUDA build of torch, where it is a real mismatch).
    """
    with _lock:
        try:
            import torchvision
        except RuntimeError as exc:
            if MISSING_OP_MESSAGE not in str(exc) or torch.version.cuda is not None:
                raise
            # Python already dropped the modules whose import failed; the ones that finished
            # (torchvision.extension, ...) stay valid, so importing again just resumes.
            _register_op_schemas()
            import torchvision
        return torchvision


def compiled_ops_available() -> bool:
    """Whether torchvision's compiled ops (nms, roi_align, …) can run in this environment."""
    torchvision = import_torchvision()
    return bool(torchvision.extension._has_ops())


def _register_op_schemas() -> None:
    """Define the op schemas torchvision's meta registrations expect (no kernels)."""
    global _schema_library
    if _schema_library is not None:
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    for op_name, schema in OP_SCHEMAS.items():
        if not _op_exists(op_name):
            library.define(schema)
    _schema_library = library


def _op_exists(op_name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"torchvision::{op_name}", "")
    except RuntimeError:
        return False
    return True
