"""Stage split: stratified Defender/Reserved split → ``data/split/membership.parquet``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.config import Params
from privaudit.data.sources import read_source
from privaudit.data.split import stratified_split
from privaudit.seeding import rng_for
from privaudit.validation import validate_membership, validate_source
from stages._runner import run_stage

MEMBERSHIP_FILE = "membership.parquet"


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", type=Path, default=Path("data/source"))
    p.add_argument("--out", type=Path, default=Path("data/split"))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Split the source into Defender (training) and Reserved (held-out) samples, per class."""
    ensure_writable(args.out)
    data = read_source(args.source)
    validate_source(data)  # input
    membership = stratified_split(data.ids, data.y, params.split.defender_fraction, rng_for(params.base.seed, "split"))
    validate_membership(membership, int(data.meta["n_classes"]), params.split.defender_fraction,
                        params.split.fraction_tolerance)
    with atomic_dir(args.out) as tmp:
        membership.to_parquet(tmp / MEMBERSHIP_FILE, index=False)
    n_def = int((membership["role"] == "defender").sum())
    print(f"split: {n_def} Defender / {len(membership) - n_def} Reserved samples → {args.out}")


if __name__ == "__main__":
    sys.exit(run_stage("split", _args, _body))
