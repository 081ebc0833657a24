"""The imagefolder source on PNG/JPEG trees the tests draw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from privaudit.data.sources import load_source


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


@pytest.fixture
def grey_tree(tmp_path: Path) -> Path:
    root = tmp_path / "imgs"
    for k, cls in enumerate(["zebra", "ant"]):
        for i in range(3):
            _save(root / cls / f"{i}.png", np.full((6, 4), 40 * (k * 3 + i), dtype=np.uint8))
    return root


def test_grey_images_sorted_classes_and_ids(grey_tree: Path) -> None:
    data = load_source("imagefolder", path=str(grey_tree))
    assert data.meta["class_names"] == ["ant", "zebra"]
    assert data.X.shape == (6, 1, 6, 4) and data.meta["image_shape"] == [1, 6, 4]
    assert data.y.tolist() == [0, 0, 0, 1, 1, 1]
    assert data.ids.tolist()[:2] == ["imagefolder:ant/0.png", "imagefolder:ant/1.png"]
    np.testing.assert_allclose(data.X[0], 120 / 255, atol=1e-6)  # ant/0.png was drawn at 40*3
    np.testing.assert_allclose(data.X[5], 80 / 255, atol=1e-6)


def test_mixed_modes_and_sizes_become_rgb_at_first_size(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    red = np.zeros((8, 10, 3), dtype=np.uint8)
    red[..., 0] = 255
    _save(root / "a" / "0.png", red)
    _save(root / "a" / "1.jpg", np.zeros((16, 20, 3), dtype=np.uint8))
    _save(root / "b" / "0.png", np.full((4, 5), 255, dtype=np.uint8))  # greyscale, smaller
    (root / "b" / "notes.txt").write_text("not an image")
    data = load_source("imagefolder", path=str(root))
    assert data.X.shape == (3, 3, 8, 10)
    np.testing.assert_allclose(data.X[0, 0], 1.0)
    np.testing.assert_allclose(data.X[0, 1:], 0.0)
    np.testing.assert_allclose(data.X[2], 1.0, atol=1e-6)  # white grey → white RGB, resized


def test_subsample_decodes_only_chosen(grey_tree: Path) -> None:
    (grey_tree / "ant" / "2.png").write_bytes(b"corrupt")  # may or may not be drawn
    rng = np.random.default_rng(0)
    data = load_source("imagefolder", path=str(grey_tree), max_samples=2, rng=np.random.default_rng(0))
    chosen = np.sort(rng.choice(6, size=2, replace=False))
    assert data.n == 2 and 2 not in chosen.tolist()
    assert data.ids.tolist() == [f"imagefolder:{p}" for p in np.array(
        ["ant/0.png", "ant/1.png", "ant/2.png", "zebra/0.png", "zebra/1.png", "zebra/2.png"])[chosen]]


def test_corrupt_image_named(grey_tree: Path) -> None:
    (grey_tree / "ant" / "1.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(ValueError, match=r"cannot read image .*ant/1\.png"):
        load_source("imagefolder", path=str(grey_tree))


def test_layout_errors(tmp_path: Path, grey_tree: Path) -> None:
    (grey_tree / "empty").mkdir()
    with pytest.raises(ValueError, match=r"class folders \['empty'\] hold no images"):
        load_source("imagefolder", path=str(grey_tree))
    (tmp_path / "flat").mkdir()
    with pytest.raises(ValueError, match="no class sub-folders"):
        load_source("imagefolder", path=str(tmp_path / "flat"))
    (tmp_path / "file.png").write_bytes(b"x")
    with pytest.raises(ValueError, match="must be a folder"):
        load_source("imagefolder", path=str(tmp_path / "file.png"))
