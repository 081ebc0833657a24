"""Shared image handling for pretrained backbones: channel fix-up, resizing, normalisation, batching."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)


def to_model_input(
    batch: np.ndarray,
    size: int,
    device: str,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> torch.Tensor:
    """Images in [0, 1] → a normalised RGB tensor at ``size``×``size``.

    Grey images (C = 1) are repeated to 3 channels; the image is resized (bilinear, with
    antialiasing when shrinking) to a square of side ``size`` without cropping; then each
    channel is normalised with ``mean``/``std`` (ImageNet by default).

    Args:
        batch: ``(b, C, H, W)`` float array in [0, 1] with C in {1, 3}.
        size: output side length.
        device: torch device string.

    Returns:
        ``(b, 3, size, size)`` float32 tensor on ``device``.
    """
    x = torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32)).to(device)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    if tuple(x.shape[-2:]) != (size, size):
        shrinking = size < max(x.shape[-2:])
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=shrinking)
    mean_t = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std_t = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - mean_t) / std_t


def check_images(X: np.ndarray, backbone: str) -> None:
    """Raise ValueError (naming ``featurize.backbone``) unless X is ``(n, 1|3, H, W)``."""
    if X.ndim != 4 or X.shape[1] not in (1, 3):
        raise ValueError(
            f"featurize.backbone={backbone!r} needs images of shape (n, 1 or 3, H, W), got {X.shape}"
        )


CPU_PIXELS_PER_BATCH = 4 * 224 * 224


def cpu_friendly_batch(batch_size: int, size: int, device: str) -> int:
    """``batch_size``, capped on CPU to about 4 images of 224 px per forward pass.

    Large activations (a batch of 64 at 224 px allocates ~100 MB per layer) make the CPU
    allocator return memory to the OS between layers; measured here on 2 cores, batches of
    64 at 224 px ran 2-5× slower per image than batches of 4. GPUs keep ``batch_size``.
    """
    if not device.startswith("cpu"):
        return batch_size
    return max(1, min(batch_size, CPU_PIXELS_PER_BATCH // (size * size)))


def embed_in_batches(
    X: np.ndarray,
    forward: Callable[[torch.Tensor], torch.Tensor],
    size: int,
    device: str,
    batch_size: int,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> np.ndarray:
    """Run ``forward`` over ``X`` in batches under ``torch.inference_mode``.

    Args:
        X: ``(n, C, H, W)`` images in [0, 1].
        forward: maps a ``(b, 3, size, size)`` tensor to ``(b, d)`` features.

    Returns:
        ``(n, d)`` float32 array in the order of ``X``.
    """
    chunks: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, X.shape[0], batch_size):
            x = to_model_input(X[start : start + batch_size], size, device, mean, std)
            out = forward(x)
            chunks.append(out.reshape(out.shape[0], -1).float().cpu().numpy())
    return np.concatenate(chunks, axis=0).astype(np.float32, copy=False)
