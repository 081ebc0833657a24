"""torchvision:<model> backbones: weights only from the hub cache, clear error when absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from privaudit.compat import import_torchvision
from privaudit.data.sources import SourceData, load_source
from privaudit.features import featurize
from privaudit.features.torchvision_models import BACKBONES, checkpoint_dir, find_weights


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty torch hub cache under tmp_path (TORCH_HOME), so nothing real is read."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    directory = checkpoint_dir()
    assert directory == tmp_path / "torch" / "hub" / "checkpoints"
    return directory


@pytest.fixture(scope="module")
def three_digits() -> SourceData:
    return load_source("digits").subset(np.array([0, 1, 2]))


@pytest.mark.parametrize("model", sorted(BACKBONES))
def test_absent_weights_error_names_file(hub: Path, three_digits: SourceData, model: str) -> None:
    with pytest.raises(ValueError) as info:
        featurize(three_digits, f"torchvision:{model}")
    message = str(info.value)
    assert f"featurize.backbone='torchvision:{model}'" in message
    assert str(hub) in message and "https://download.pytorch.org/models/" in message
    assert not hub.exists() or not any(hub.iterdir())  # nothing downloaded


def test_cached_weights_are_used(hub: Path, three_digits: SourceData) -> None:
    torchvision = import_torchvision()
    reference = torchvision.models.resnet18(weights=None).eval()
    url = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.url
    hub.mkdir(parents=True)
    torch.save(reference.state_dict(), hub / Path(url).name)
    Z = featurize(three_digits, "torchvision:resnet18", image_size=32, batch_size=2)
    assert Z.shape == (3, 512) and Z.dtype == np.float32
    reference.fc = torch.nn.Identity()
    x = torch.from_numpy(np.repeat(three_digits.X, 3, axis=1))
    x = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False, antialias=False)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.inference_mode():
        expected = reference((x - mean) / std).numpy()
    np.testing.assert_allclose(Z, expected, rtol=1e-4, atol=1e-4)


def test_second_choice_weights_and_corrupt_file(hub: Path, three_digits: SourceData) -> None:
    torchvision = import_torchvision()
    v1 = hub / Path(torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url).name
    hub.mkdir(parents=True)
    v1.write_bytes(b"not a checkpoint")
    weights, path = find_weights("resnet50")
    assert path == v1 and weights is torchvision.models.ResNet50_Weights.IMAGENET1K_V1
    with pytest.raises(ValueError, match=r"weights file .*resnet50-0676ba61\.pth cannot be loaded"):
        featurize(three_digits, "torchvision:resnet50", image_size=32)


def test_unknown_model(three_digits: SourceData) -> None:
    with pytest.raises(ValueError, match=r"torchvision:alexnet' is not supported"):
        featurize(three_digits, "torchvision:alexnet")
