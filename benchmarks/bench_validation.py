"""Great Expectations validation of the stages' tables: asking GX for the complete result of every batch (offending
rows and values, the plain way) against privaudit's pass/fail first and the complete result only for a batch
that failed (:mod:`privaudit.validation.core`).

The suites of the default audit's shapes, on sound synthetic tables (every batch passes, as in a normal run): the
source (1 797 x 64, 10 classes), a defender's outputs table (1 797 rows), and the canary statistics of one
defender (Game 3 with 224 canaries, LiDP with 32 trials). Arm "complete" makes every ``Batch.validate`` use
``result_format="COMPLETE"`` (the code before); arm "library" is the library. Alternating pairs after one warm-up of
each; every call must pass in both arms.

    PYTHONPATH=src:. python benchmarks/bench_validation.py [--pairs 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.pairs import pair_summary, report
from privaudit.data.sources import SourceData
from privaudit.data.sources.base import make_ids
from privaudit.validation import validate_canary_stats, validate_defender_outputs, validate_source


def tables(seed: int = 0) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    n, d, c = 1797, 64, 10
    y = (np.arange(n) % c).astype(np.int64)
    source = SourceData(X=rng.normal(size=(n, d)).astype(np.float32), y=y, ids=make_ids("t", n),
                        meta={"name": "t", "n_classes": c, "class_names": [str(k) for k in range(c)],
                              "modality": "tabular", "image_shape": None, "origin": "bench"})
    p = rng.dirichlet(np.ones(c), size=n)
    outputs = pd.concat([pd.DataFrame({"id": source.ids, "role": ["defender", "reserved"] * (n // 2) + ["defender"],
                                       "label": y, "loss": -np.log(p[np.arange(n), y]), "correct": p.argmax(1) == y}),
                         pd.DataFrame(p, columns=[f"p_{k}" for k in range(c)])], axis=1)
    true = rng.integers(0, c, 224)
    game3 = {"true_label": true, "label_pair": np.stack([(true + 1) % c, (true + 2) % c], 1),
             "bit": rng.integers(0, 2, 224), "proba": rng.dirichlet(np.ones(c), 224), "canary_index": np.arange(224)}
    lidp = {"loss_in": rng.random((32, 16)), "loss_null": rng.random((32, 64))}
    return {"source": source, "outputs": outputs, "game3": game3, "lidp": lidp}


def validate_all(t: dict[str, object]) -> None:
    validate_source(t["source"])  # type: ignore[arg-type]
    outputs = t["outputs"]
    validate_defender_outputs(outputs, 10, outputs["id"].to_numpy())  # type: ignore[index]
    validate_canary_stats("game3", t["game3"])  # type: ignore[arg-type]
    validate_canary_stats("lidp", t["lidp"])  # type: ignore[arg-type]


def main() -> None:
    from great_expectations.datasource.fluent.interfaces import Batch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    t = tables()
    library = Batch.validate

    def complete(self, suite, result_format="SUMMARY", **kw):  # type: ignore[no-untyped-def]
        return library(self, suite, result_format="COMPLETE", **kw)

    def timed(arm: str) -> float:
        Batch.validate = complete if arm == "complete" else library  # type: ignore[method-assign]
        start = time.perf_counter()
        validate_all(t)
        return time.perf_counter() - start

    timed("complete"), timed("library")  # warm-up: the context, the data source, the assets
    walls: dict[str, list[float]] = {"complete": [], "library": []}
    for _ in range(a.pairs):
        for arm in walls:
            walls[arm].append(timed(arm))
    Batch.validate = library  # type: ignore[method-assign]
    report(pair_summary("bench_validation: GX suites of the default audit's shapes (source, a defender's outputs, "
                        "one defender's canary statistics), every batch passing",
                        ("complete result for every batch", walls["complete"]),
                        ("pass/fail first (library)", walls["library"]), load), a.out)


if __name__ == "__main__":
    main()
