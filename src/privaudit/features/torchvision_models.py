"""``torchvision:<model>`` backbones (the LTU paper's) with ImageNet weights from the local torch hub cache.

Weights are read only from ``torch.hub.get_dir()/checkpoints/<file>`` (``$TORCH_HOME/hub``,
default ``~/.cache/torch/hub``), the file name being the one torchvision itself downloads to.
Nothing is ever downloaded here: when the file is absent the error names the path to place it
at and the URL to fetch it from (``curl -L -o <path> <url>`` on a machine with network).

Embeddings are the input of each model's final classification layer:
resnet18 512-d, resnet50 2048-d, vgg19 4096-d (after the second fully connected layer + ReLU),
efficientnet_v2_s 1280-d.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from privaudit.compat import import_torchvision
from privaudit.features.images import check_images, cpu_friendly_batch, embed_in_batches


@dataclass(frozen=True)
class TorchvisionBackbone:
    """How to build one backbone: torchvision builder and weights enum names, embedding size."""

    builder: str
    weights: tuple[str, ...]  # ``Enum.MEMBER`` names, preferred first; any cached one is used
    embed_dim: int


BACKBONES: dict[str, TorchvisionBackbone] = {
    "resnet18": TorchvisionBackbone("resnet18", ("ResNet18_Weights.IMAGENET1K_V1",), 512),
    "resnet50": TorchvisionBackbone(
        "resnet50", ("ResNet50_Weights.IMAGENET1K_V2", "ResNet50_Weights.IMAGENET1K_V1"), 2048
    ),
    "vgg19": TorchvisionBackbone("vgg19", ("VGG19_Weights.IMAGENET1K_V1",), 4096),
    "efficientnet_v2_s": TorchvisionBackbone("efficientnet_v2_s", ("EfficientNet_V2_S_Weights.IMAGENET1K_V1",), 1280),
}


def checkpoint_dir() -> Path:
    """``torch.hub.get_dir()/checkpoints``, where torchvision caches downloaded weights."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def _weights_enum(name: str) -> object:
    torchvision = import_torchvision()
    enum_name, member = name.split(".")
    return getattr(getattr(torchvision.models, enum_name), member)


def find_weights(model: str) -> tuple[object, Path]:
    """The first of the model's weights whose file is in the hub cache.

    Returns:
        ``(weights enum member, path to the cached file)``.

    Raises:
        ValueError: unknown model, or no weights file cached; names ``featurize.backbone``,
            the expected path and the download URL.
    """
    spec = _spec(model)
    candidates = [_weights_enum(w) for w in spec.weights]
    for weights in candidates:
        path = checkpoint_dir() / Path(weights.url).name  # type: ignore[attr-defined]
        if path.is_file():
            return weights, path
    preferred = candidates[0]
    expected = checkpoint_dir() / Path(preferred.url).name  # type: ignore[attr-defined]
    raise ValueError(
        f"featurize.backbone='torchvision:{model}' needs the ImageNet weights file {expected} "
        f"(not found; privaudit never downloads weights). On a machine with network run: "
        f"mkdir -p {expected.parent} && curl -L -o {expected} {preferred.url}  "  # type: ignore[attr-defined]
        f"(or set TORCH_HOME to a directory whose hub/checkpoints/ holds it)"
    )


def _spec(model: str) -> TorchvisionBackbone:
    if model not in BACKBONES:
        raise ValueError(
            f"featurize.backbone='torchvision:{model}' is not supported; use one of "
            f"{['torchvision:' + m for m in BACKBONES]}"
        )
    return BACKBONES[model]


def build_model(model: str, device: str) -> tuple[torch.nn.Module, object]:
    """The backbone with cached ImageNet weights and its classifier replaced by the identity.

    Returns:
        ``(module mapping (b, 3, s, s) → (b, embed_dim), weights enum member)``.
    """
    spec = _spec(model)
    weights, path = find_weights(model)
    torchvision = import_torchvision()
    net = getattr(torchvision.models, spec.builder)(weights=None)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state, strict=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ValueError(
            f"featurize.backbone='torchvision:{model}': weights file {path} cannot be loaded "
            f"(truncated or not the {weights} state dict?): {exc}"
        ) from exc
    if spec.builder.startswith("resnet"):
        net.fc = torch.nn.Identity()
    elif spec.builder.startswith("vgg"):
        net.classifier = net.classifier[:-1]  # drop only the final Linear: 4096-d after ReLU+Dropout
    else:
        net.classifier = torch.nn.Identity()
    return net.eval().to(device), weights


def embed_torchvision(
    X: np.ndarray, model: str, device: str = "cpu", batch_size: int = 64, image_size: int | None = None
) -> np.ndarray:
    """Embeddings of images from a torchvision ImageNet backbone.

    Args:
        X: ``(n, C, H, W)`` float images in [0, 1], C in {1, 3} (grey → 3 channels).
        model: one of :data:`BACKBONES`.
        image_size: resize side; ``None`` = the weights' evaluation crop size (224; 384 for
            efficientnet_v2_s). Images are resized whole, not cropped.

    Returns:
        ``(n, embed_dim)`` float32 array, rows in the order of ``X``.
    """
    backbone = f"torchvision:{model}"
    check_images(X, backbone)
    spec = _spec(model)
    find_weights(model)  # fail before building anything
    net, weights = build_model(model, device)
    preset = weights.transforms()  # type: ignore[attr-defined]
    size = int(preset.crop_size[0]) if image_size is None else int(image_size)
    out = embed_in_batches(
        X, net, size, device, cpu_friendly_batch(batch_size, size, device), mean=preset.mean, std=preset.std
    )
    if out.shape[1] != spec.embed_dim:
        raise RuntimeError(f"{backbone}: expected {spec.embed_dim}-d embeddings, got {out.shape[1]}")
    return out
