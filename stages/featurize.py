"""Stage featurize: embeddings with ``featurize.backbone`` → ``data/features/`` (float32 n×d, ids).

What the feature map fits (the ``identity`` backbone's column statistics) is fitted on the Reserved
rows of ``data/split`` only, so no Defender row shapes the features outside the audited recipe.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import atomic_dir, dumps_json, ensure_writable
from privaudit.config import Params
from privaudit.data.sources import read_source
from privaudit.data.split import read_membership, reserved_mask
from privaudit.repro.determinism import configure_determinism
from privaudit.features import featurize, resolve_device
from privaudit.validation import validate_features, validate_source
from stages._runner import run_stage

FEATURES_FILE = "features.npz"
META_FILE = "meta.json"


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", type=Path, default=Path("data/source"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--out", type=Path, default=Path("data/features"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Embed every source sample with the configured backbone (cached as a DVC output)."""
    ensure_writable(args.out)
    data = read_source(args.source)
    validate_source(data)  # input
    f = params.featurize
    # only the identity backbone fits anything on the data (pretrained backbones fit nothing)
    fit_rows = reserved_mask(read_membership(args.split), data.ids) if f.backbone == "identity" else None
    device = resolve_device(params.base.device)
    configure_determinism(device)
    X = featurize(data, f.backbone, device=device, batch_size=f.batch_size, image_size=f.image_size,
                  fit_rows=fit_rows)
    expected_dim = int(data.X[0].size) if f.backbone == "identity" and data.n else None
    validate_features(X, data.ids, data.ids, expected_dim)  # output, before it is moved into place
    with atomic_dir(args.out) as tmp:
        np.savez(tmp / FEATURES_FILE, X=X.astype(np.float32), ids=data.ids.astype(str))
        (tmp / META_FILE).write_text(dumps_json({
            "backbone": f.backbone, "dim": int(X.shape[1]), "n": int(X.shape[0]),
            "n_classes": int(data.meta["n_classes"]), "dataset": data.meta.get("name"),
            # what the feature map fitted on this data: only Reserved rows, and only for identity
            "fitted_on": "reserved" if f.backbone == "identity" else "none",
            "fit_rows": int(fit_rows.sum()) if fit_rows is not None else 0,
        }))
    print(f"featurize: {X.shape[0]}×{X.shape[1]} features with {f.backbone!r} on {device} → {args.out}")


if __name__ == "__main__":
    sys.exit(run_stage("featurize", _args, _body))
