"""Stage ingest: load ``dataset.name`` → ``data/source/`` (X, y, ids, meta with the data set's identity and digest)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.config import Params
from privaudit.data.sources import load_source, save_source, stamp_source
from privaudit.seeding import rng_for
from privaudit.validation import validate_source
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("data/source"))


#: the folder dvc.yaml lists as the ingest stage's data dependency
TRACKED_DATA = Path("data/external")


def untracked_path_warning(path: str | None, tracked: Path = TRACKED_DATA) -> str | None:
    """A warning when ``dataset.path`` lies outside the folder DVC watches for the ingest stage."""
    if path is None:
        return None
    resolved, root = Path(path).resolve(), tracked.resolve()
    if resolved == root or root in resolved.parents:
        return None
    return (f"dataset.path={path!r} is outside {tracked}/, which is the ingest stage's DVC dependency: "
            "`dvc repro` will not notice when that data changes. Move or `dvc import` it under "
            f"{tracked}/, or force a rerun with `dvc repro -f -s ingest` after changing it.")


def _body(args: argparse.Namespace, params: Params) -> None:
    """Load the source data set named in params.dataset."""
    ensure_writable(args.out)
    ds = params.dataset
    warning = untracked_path_warning(ds.path)
    if warning:
        print(f"ingest: warning: {warning}", file=sys.stderr)
    data = load_source(ds.name, path=ds.path, label_column=ds.label_column, max_samples=ds.max_samples,
                       rng=rng_for(params.base.seed, "ingest"))
    data = stamp_source(data, ds.data_identity())  # meta.json: identity (the release ledger's grouping) and digest
    validate_source(data)  # GX suite 'source' on the output, before it is moved into place
    with atomic_dir(args.out) as tmp:
        save_source(data, tmp)
    print(f"ingest: {len(data.y)} samples, {data.meta['n_classes']} classes from {ds.name!r} → {args.out}")


if __name__ == "__main__":
    sys.exit(run_stage("ingest", _args, _body))
