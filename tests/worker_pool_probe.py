"""Run in a fresh process by ``tests/unit/test_worker_pool.py``: :mod:`privaudit.repro.worker_pool` where forking
is allowed.

A pytest-xdist worker runs threads of its own, so there :func:`privaudit.repro.worker_pool.fork_refusal` refuses
(rightly) and every pool is loky's (the suite's tests of bits across ``n_jobs`` cover that path); this script runs
in a process with one thread and prints one JSON object of what it saw.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import numpy as np


class Unpicklable:
    """Shared state that cannot be pickled: a forked worker inherits it (a loky worker could not receive it)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __reduce__(self):  # type: ignore[no-untyped-def]
        raise TypeError("Unpicklable must not be pickled")


def add(shared: object, x: float) -> float:
    return float(getattr(shared, "value", shared)) + x


def threads_seen(_shared: object, _i: int) -> dict[str, object]:
    from threadpoolctl import threadpool_info

    import torch

    return {"pid": os.getpid(), "torch": torch.get_num_threads(),
            "pools": sorted({(i["internal_api"], i["num_threads"]) for i in threadpool_info()})}


def fails(_shared: object, x: int) -> int:
    if x == 2:
        raise ValueError(f"planted failure at item {x}")
    return x


def logreg_proba(X: np.ndarray, y: np.ndarray, seed: int) -> list[float]:
    """A scikit-learn fit as the canary shards and the LTU reference models run it (through their own function)."""
    from privaudit.attacks.mia_reference import _fit_conf
    from privaudit.defenders.specs import validate_defender_spec

    spec = validate_defender_spec({"name": "lr", "kind": "logistic_regression", "randomness": "unseeded"})
    rows = np.random.default_rng(seed).permutation(len(y))[: len(y) // 2]
    return _fit_conf(spec, 3, X, y, rows, seed).tolist()


def main() -> None:
    from privaudit.repro import worker_pool as wp

    out: dict[str, object] = {"refusal": wp.fork_refusal()}
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 20)).astype(np.float32)
    y = rng.integers(0, 3, size=300)
    seeds = [(s,) for s in range(6)]
    # first in this process, as a stage fits before it starts workers: the workers inherit its imports
    out["in_process_logreg"] = [logreg_proba(X, y, s) for (s,) in seeds]
    out["refusal_after_imports"] = wp.fork_refusal()
    out["fork_add"] = list(wp.map_in_processes(add, [(float(i),) for i in range(8)], 2, shared=(Unpicklable(0.5),)))
    out["fork_unordered"] = sorted(wp.map_in_processes(add, [(float(i),) for i in range(8)], 2, shared=(1.0,),
                                                      ordered=False))
    out["fork_threads"] = list(wp.map_in_processes(threads_seen, [(i,) for i in range(2)], 2, shared=(None,)))
    out["expected_threads"] = wp.worker_threads(2)
    try:
        list(wp.map_in_processes(fails, [(i,) for i in range(4)], 2, shared=(None,)))
        out["fork_error"] = None
    except ValueError as err:
        out["fork_error"] = str(err)
    out["fork_logreg"] = list(wp.map_in_processes(logreg_proba, seeds, 2, shared=(X, y)))
    out["threads_after"] = threading.active_count()
    stop = threading.Event()
    side = threading.Thread(target=stop.wait, name="probe-side-thread")
    side.start()
    out["refusal_with_thread"] = wp.fork_refusal()
    stop.set()
    side.join()
    # what a stage does before its workers: a GX validation (it opens tqdm bars) after the runner's switch
    from privaudit.progress import no_monitor_thread
    from privaudit.validation import validate_metrics

    no_monitor_thread()
    validate_metrics("bounds", {"logreg": {"thudi": 0.6, "yeom": 0.55, "erlingsson": 0.7, "sablayrolles": 0.6,
                                           "mip_eta": 0.1, "empirical_accuracy": 0.52}})
    out["refusal_after_gx"] = wp.fork_refusal()
    # the report's figures drawn on two forked workers: the same PNG bytes as one after the other here
    from privaudit.report.figures import render_plots
    from tests.report import synthetic

    inputs = synthetic.report_inputs()
    here, forked = render_plots(inputs, 1), render_plots(inputs, 2)
    out["figures_same"] = here == forked and sum(v is not None for v in here.values()) >= 4
    os.environ[wp.FORK_ENV] = "0"
    out["refusal_env"] = wp.fork_refusal()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
