"""Class-per-folder images: ``dataset.path/<class name>/<image file>``.

Classes are the sub-folder names in sorted order (class ``c`` = ``meta["class_names"][c]``);
files are read in sorted order within each class. Every image is decoded with PIL and resized
(bilinear) to the size of the first image, so ``X`` is one ``(n, C, H, W)`` array; C is 1 when
every image is greyscale, else 3 (RGB; alpha dropped). Ids are ``"imagefolder:<class>/<file>"``,
stable when files are added or removed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privaudit.data.sources.base import DataSourceError, SourceData, subsample_index

IMAGE_SUFFIXES: frozenset[str] = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
GREY_MODES: frozenset[str] = frozenset({"1", "L", "LA", "I", "I;16", "F"})


def list_images(root: Path) -> tuple[list[str], list[tuple[Path, int]]]:
    """Sorted class names and ``(file, class index)`` pairs under ``root``.

    Raises:
        DataSourceError: ``root`` is not a folder, has no class folders, or a class folder
            holds no images (names ``dataset.path`` and the folder).
    """
    if not root.is_dir():
        raise DataSourceError(f"dataset.path={str(root)!r} must be a folder of class folders (dataset.name='imagefolder')")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DataSourceError(f"dataset.path={str(root)!r} has no class sub-folders (expected <path>/<class>/<image>)")
    files: list[tuple[Path, int]] = []
    empty: list[str] = []
    for index, name in enumerate(classes):
        found = sorted(
            p for p in (root / name).rglob("*")
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")
        )
        if not found:
            empty.append(name)
        files.extend((p, index) for p in found)
    if empty:
        raise DataSourceError(
            f"dataset.path={str(root)!r}: class folders {empty} hold no images ({sorted(IMAGE_SUFFIXES)}); "
            "remove them or add images"
        )
    return classes, files


def load_imagefolder(
    root: Path, max_samples: int | None = None, rng: np.random.Generator | None = None
) -> SourceData:
    """Decode the images under ``root`` (only the subsample when ``max_samples`` is set).

    Returns:
        :class:`SourceData` with ``X`` ``(n, C, H, W)`` float32 in [0, 1], ``y`` ``(n,)``.

    Raises:
        DataSourceError: bad folder layout, or an image that PIL cannot decode (named).
    """
    from PIL import Image, UnidentifiedImageError

    root = Path(root)
    classes, files = list_images(root)
    index = subsample_index(len(files), max_samples, rng)
    if index is not None:
        files = [files[i] for i in index]

    modes: list[str] = []
    first_size: tuple[int, int] | None = None
    for path, _ in files:  # headers only: cheap
        try:
            with Image.open(path) as img:
                modes.append(img.mode)
                first_size = first_size or img.size
        except (UnidentifiedImageError, OSError) as exc:
            raise DataSourceError(f"dataset.path={str(root)!r}: cannot read image {path}: {exc}") from exc
    if first_size is None:
        raise DataSourceError(f"dataset.path={str(root)!r}: no images to load")
    grey = all(m in GREY_MODES for m in modes)
    channels = 1 if grey else 3
    width, height = first_size

    X = np.empty((len(files), channels, height, width), dtype=np.float32)
    for row, (path, _) in enumerate(files):
        X[row] = _decode(path, grey, (width, height), root)
    y = np.array([label for _, label in files], dtype=np.int64)
    ids = np.array([f"imagefolder:{p.relative_to(root).as_posix()}" for p, _ in files], dtype=np.str_)
    meta = {
        "name": "imagefolder",
        "n_classes": len(classes),
        "class_names": classes,
        "modality": "image",
        "image_shape": [channels, height, width],
        "origin": root.name,
    }
    return SourceData(X=X, y=y, ids=ids, meta=meta)


def _decode(path: Path, grey: bool, size: tuple[int, int], root: Path) -> np.ndarray:
    """One image as ``(C, H, W)`` float32 in [0, 1], converted and resized to ``size`` (W, H)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            img: Image.Image = opened.convert("L" if grey else "RGB")
            if img.size != size:
                img = img.resize(size, Image.Resampling.BILINEAR)
            pixels = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    except (UnidentifiedImageError, OSError) as exc:
        raise DataSourceError(f"dataset.path={str(root)!r}: cannot decode image {path}: {exc}") from exc
    return pixels[None, :, :] if grey else np.moveaxis(pixels, -1, 0)
