"""Stage ingest: load ``dataset.name`` → ``data/source/`` (X, y, ids, meta)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.config import Params
from privaudit.data.sources import load_source, save_source
from privaudit.seeding import rng_for
from privaudit.validation import validate_source
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("data/source"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Load the source data set named in params.dataset."""
    ensure_writable(args.out)
    ds = params.dataset
    data = load_source(ds.name, path=ds.path, label_column=ds.label_column, max_samples=ds.max_samples,
                       rng=rng_for(params.base.seed, "ingest"))
    validate_source(data)  # GX suite 'source' on the output, before it is moved into place
    with atomic_dir(args.out) as tmp:
        save_source(data, tmp)
    print(f"ingest: {len(data.y)} samples, {data.meta['n_classes']} classes from {ds.name!r} → {args.out}")


if __name__ == "__main__":
    sys.exit(run_stage("ingest", _args, _body))
