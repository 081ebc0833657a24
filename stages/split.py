"""Stage split: stratified Defender/Reserved split → ``data/split/membership.parquet``.

The first stage that knows the Defender and Reserved set sizes: it checks, before any model is
trained, that the canary experiments fit them (``game3.canaries``, ``lidp.canaries`` +
``lidp.null_canaries``, ...; :func:`privaudit.canaries.sizes.check_canary_sizes`) and prints
the resolved ``game3.canaries: auto``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import atomic_dir, ensure_writable
from privaudit.canaries.plan import CanaryPlan
from privaudit.canaries.sizes import check_canary_sizes, game3_canaries
from privaudit.config import Params
from privaudit.data.sources import read_source
from privaudit.data.split import MEMBERSHIP_FILE, stratified_split
from privaudit.seeding import rng_for
from privaudit.validation import validate_membership, validate_source
from stages._runner import run_stage


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
    n_def = int((membership["role"] == "defender").sum())
    n_res = len(membership) - n_def
    # the feature dimension is known here only when featurize keeps the inputs (identity backbone)
    d = int(np.prod(data.X.shape[1:])) if params.featurize.backbone == "identity" else None
    canaries = CanaryPlan.of(params)
    check_canary_sizes(canaries, n_def, n_res, d)  # before any training: messages name the params key
    with atomic_dir(args.out) as tmp:
        membership.to_parquet(tmp / MEMBERSHIP_FILE, index=False)
    print(f"split: {n_def} Defender / {n_res} Reserved samples → {args.out}; "
          f"Game 3 with {game3_canaries(canaries, n_def)} canaries (game3.canaries: {params.game3.canaries})")


if __name__ == "__main__":
    sys.exit(run_stage("split", _args, _body))
