"""Shards: plan, determinism independent of the cut, atomic store, resume, fingerprints, Dask."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from privaudit.canaries.shards import (
    Shard,
    dispatch_order,
    load_shard,
    missing_shards,
    plan_shards,
    run_missing_shards,
    run_shard,
    save_shard,
    shard_dir,
    shard_path,
    shards_at_once,
    start_lanes,
)
from tests.canaries.conftest import DP, LOGREG, MLP, digits_features, make_params


def test_plan_covers_every_trial_once_on_block_boundaries() -> None:
    p = make_params([MLP, LOGREG], lidp={"trials": 10}, compute={"block_trials": 4, "shard_trials": 5},
                    game3={"runs": 3})
    plan = plan_shards(p)
    cuts = {"mlp": [(0, 8), (8, 10)],  # 5 rounded up to 2 blocks of 4
            "logreg": [(0, 4), (4, 8), (8, 10)]}  # one fit per trial: shards of one block (even workers, resume)
    for name in ("mlp", "logreg"):
        lidp = [s for s in plan if s.defender == name and s.experiment == "lidp"]
        assert [(s.start, s.stop) for s in lidp] == cuts[name]
        assert [(s.start, s.stop) for s in plan if s.defender == name and s.experiment == "game3"] == [(0, 3)]
    assert plan_shards(p, shard_size=1)[1] == Shard("mlp", "lidp", 0, 4)


@pytest.mark.parametrize("spec", [MLP, DP, LOGREG])
def test_results_do_not_depend_on_the_shard_cut(small_fs, spec) -> None:
    p = make_params([spec])
    whole = run_shard(p, small_fs, Shard(spec["name"], "lidp", 0, 8), "cpu")
    parts = [run_shard(p, small_fs, Shard(spec["name"], "lidp", s, s + 4), "cpu") for s in (0, 4)]
    for key in ("loss_in", "loss_null"):
        np.testing.assert_array_equal(whole[key], np.concatenate([x[key] for x in parts]))
    assert whole["loss_in"].shape == (8, 3) and whole["loss_null"].shape == (8, 3)
    assert np.all(np.isfinite(whole["loss_in"])) and len(np.unique(whole["loss_in"])) > 8
    with pytest.raises(ValueError, match="block boundary"):
        run_shard(p, small_fs, Shard(spec["name"], "lidp", 2, 6), "cpu")


def test_store_roundtrip_missing_and_fingerprint(tmp_path: Path, small_fs) -> None:
    p = make_params([MLP])
    plan = plan_shards(p)
    assert missing_shards(tmp_path, p, small_fs) == plan
    arrays = run_shard(p, small_fs, plan[1], "cpu")
    path = save_shard(tmp_path, p, plan[1], arrays)
    assert path.is_file() and path.parent.parent == shard_dir(tmp_path, p)
    assert not list(path.parent.glob(".*tmp*"))
    assert plan[1] not in missing_shards(tmp_path, p, small_fs)
    back = load_shard(tmp_path, p, plan[1])
    np.testing.assert_array_equal(back["loss_in"], arrays["loss_in"])
    # other inputs: the shard counts as missing again; other params: another directory
    other = digits_features(400, seed=1)
    assert plan[1] in missing_shards(tmp_path, p, other)
    p2 = make_params([MLP], lidp={"trials": 8, "canary_type": "random_gradient"})
    assert shard_dir(tmp_path, p2) != shard_dir(tmp_path, p)
    # a different spec of the same defender name lives in its own sub-directory
    p3 = make_params([{**MLP, "epochs": 3}])
    assert plan[1] in missing_shards(tmp_path, p3, small_fs)


def test_game3_shard_shapes_and_labels(small_fs) -> None:
    p = make_params([MLP], game3={"runs": 2, "canaries": 20})
    g = run_shard(p, small_fs, Shard("mlp", "game3", 0, 2), "cpu")
    assert g["proba"].shape == (2, 20, 10) and g["label_pair"].shape == (2, 20, 2)
    np.testing.assert_allclose(g["proba"].sum(2), 1.0, atol=1e-9)
    pair, true = g["label_pair"], g["true_label"]
    assert np.all(pair[..., 0] != pair[..., 1]) and np.all(pair[..., 0] != true) and np.all(pair[..., 1] != true)
    assert not np.array_equal(g["canary_index"][0], g["canary_index"][1])


@pytest.mark.parametrize("ctype", ["clipbkd", "random_gradient"])
def test_batched_only_canary_types(small_fs, ctype) -> None:
    from privaudit.canaries.runner import check_canary_setup

    p = make_params([MLP], lidp={"trials": 4, "canary_type": ctype})
    out = run_shard(p, small_fs, Shard("mlp", "lidp", 0, 4), "cpu")
    assert out["loss_in"].shape == (4, 2) and np.all(np.isfinite(out["loss_in"]))
    with pytest.raises(ValueError, match="lidp.canary_type"):
        check_canary_setup(make_params([LOGREG], lidp={"canary_type": ctype}), small_fs)


def test_replace_one_trains_one_model_per_trial(small_fs) -> None:
    p = make_params([DP], lidp={"neighbourhood": "replace_one"})
    out = run_shard(p, small_fs, Shard("dp", "lidp", 0, 4), "cpu")
    assert out["loss_in"].shape == (4, 3) and out["loss_null"].shape == (4, 3)


def test_dask_local_cluster_gives_the_local_results(tmp_path: Path, small_fs) -> None:
    distributed = pytest.importorskip("distributed")
    p_local = make_params([MLP])
    local_root, dask_root = tmp_path / "local", tmp_path / "dask"
    run_missing_shards(local_root, p_local, small_fs, plan_shards(p_local), "cpu")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster:
        p_dask = make_params([MLP], compute={"scheduler": cluster.scheduler_address})
        assert shard_dir(dask_root, p_dask).name == shard_dir(local_root, p_local).name
        run_missing_shards(dask_root, p_dask, small_fs, missing_shards(dask_root, p_dask, small_fs), "cpu")
    assert missing_shards(dask_root, p_dask, small_fs) == []
    for shard in plan_shards(p_local):
        a, b = load_shard(local_root, p_local, shard), load_shard(dask_root, p_dask, shard)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_prune_keeps_only_the_shards_these_params_use(tmp_path: Path, small_fs) -> None:
    from privaudit.canaries.shards import prune_shards

    p = make_params([MLP, DP], lidp={"trials": 4})
    old = make_params([MLP], lidp={"trials": 8})
    for params in (p, old):
        shard = plan_shards(params)[0]
        save_shard(tmp_path, params, shard, {"loss_in": np.zeros((1, 1))})
    gone_defender = shard_dir(tmp_path, p) / "retired-0123456789"
    gone_defender.mkdir()
    unrelated = tmp_path / "notes"
    unrelated.mkdir()
    kept = [shard_path(tmp_path, p, s) for s in plan_shards(p)[:1]]
    removed = prune_shards(tmp_path, p)
    assert set(removed) == {shard_dir(tmp_path, old), gone_defender}
    assert all(k.is_file() for k in kept) and unrelated.is_dir()
    assert prune_shards(tmp_path, p) == [] and prune_shards(tmp_path / "absent", p) == []


def test_local_worker_processes_give_the_one_process_results(tmp_path: Path, small_fs) -> None:
    """compute.n_jobs: 2 runs whole shards in two local processes: same shard key, same arrays."""
    sequential = {"name": "knn", "kind": "logistic_regression"}
    one = make_params([sequential, MLP])
    two = make_params([sequential, MLP], compute={"n_jobs": 2})
    assert shard_dir(tmp_path / "a", one).name == shard_dir(tmp_path / "b", two).name
    run_missing_shards(tmp_path / "a", one, small_fs, plan_shards(one), "cpu")
    seen: list[Shard] = []
    seconds: list[float] = []
    run_missing_shards(tmp_path / "b", two, small_fs, plan_shards(two), "cpu",
                       lambda shard, took: (seen.append(shard), seconds.append(took)))
    assert sorted(seen, key=plan_shards(two).index) == plan_shards(two)  # every shard reported once
    assert all(t > 0 for t in seconds)  # with the seconds it took in its worker (the plan's audit-fit time)
    for shard in plan_shards(one):
        a, b = load_shard(tmp_path / "a", one, shard), load_shard(tmp_path / "b", two, shard)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_n_jobs_auto_gives_the_one_process_results(tmp_path: Path, small_fs, monkeypatch) -> None:
    """compute.n_jobs: auto uses the process's cores (2 here, whatever the machine): same key, same arrays."""
    from privaudit import config

    monkeypatch.setattr(config, "available_cores", lambda: 2)
    sequential = {"name": "knn", "kind": "logistic_regression"}
    one = make_params([sequential, MLP])
    auto = make_params([sequential, MLP], compute={"n_jobs": "auto"})
    assert auto.compute.workers() == 2 and one.compute.workers() == 1
    assert shard_dir(tmp_path / "a", one).name == shard_dir(tmp_path / "b", auto).name
    run_missing_shards(tmp_path / "a", one, small_fs, plan_shards(one), "cpu")
    run_missing_shards(tmp_path / "b", auto, small_fs, plan_shards(auto), "cpu")
    for shard in plan_shards(one):
        a, b = load_shard(tmp_path / "a", one, shard), load_shard(tmp_path / "b", auto, shard)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_the_workers_are_told_the_device_their_shards_train_on(tmp_path: Path, small_fs, monkeypatch) -> None:
    """A ``kind: python`` trainer declaring ``device`` (or a label-DP, PATE, MIP one) gets ``cuda`` in a worker; the
    pool is told, so that it is not forked from a process that initialised the CUDA driver
    (``privaudit.repro.cuda_state``). Workers fitting only scikit-learn kinds never touch the GPU: told ``cpu``."""
    from privaudit.repro import worker_pool

    told: list[str] = []
    monkeypatch.setattr(worker_pool, "map_in_processes", lambda *a, **k: told.append(k["device"]) or iter(()))
    sklearn_only = make_params([{"name": "knn", "kind": "logistic_regression"}], compute={"n_jobs": 2})
    label_dp = make_params([{"name": "knn", "kind": "logistic_regression"},
                            {"name": "a", "kind": "alibi", "epsilon": 2.0, "hidden": [], "epochs": 1}],
                           compute={"n_jobs": 2})
    for params, device in ((sklearn_only, "cuda"), (label_dp, "cuda"), (label_dp, "cpu")):
        run_missing_shards(tmp_path, params, small_fs, plan_shards(params), device)
    assert told == ["cpu", "cuda", "cpu"]


def test_batched_shards_beside_the_workers_give_the_one_process_results(tmp_path: Path, small_fs,
                                                                       monkeypatch) -> None:
    """On CUDA the batched kinds' shards train in the stage's process while workers run the sequential ones;
    exercised on the CPU by keeping the MLP's shards here: every shard saved and reported once, same arrays."""
    from privaudit.canaries import shards as shards_module

    monkeypatch.setattr(shards_module, "_trains_here", lambda plan, shard, device: shard.defender == "mlp")
    sequential = {"name": "knn", "kind": "logistic_regression"}
    one = make_params([sequential, MLP])
    two = make_params([sequential, MLP], compute={"n_jobs": 2})
    run_missing_shards(tmp_path / "a", one, small_fs, plan_shards(one), "cpu")
    seen: list[Shard] = []
    run_missing_shards(tmp_path / "b", two, small_fs, plan_shards(two), "cpu", lambda shard, took: seen.append(shard))
    assert sorted(seen, key=plan_shards(two).index) == plan_shards(two)
    assert {s.defender for s in seen} == {"knn", "mlp"}
    for shard in plan_shards(one):
        a, b = load_shard(tmp_path / "a", one, shard), load_shard(tmp_path / "b", two, shard)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_a_shard_runs_blas_on_one_thread_wherever_it_runs(small_fs, monkeypatch) -> None:
    """Sequential fits add their sums in one order in every process: the stage's own (BLAS on every core
    before) and the loky workers (BLAS on cores / n_jobs threads) — else compute.n_jobs changed the bits of
    scikit-learn fits large enough for threaded BLAS (10k x 128 logistic regression: up to 4e-5)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from privaudit.canaries import runner, shards as shards_module

    seen: list[int] = []

    def record(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] in ("blas", "openmp"))
        return {}

    monkeypatch.setattr(runner, "run_trials", record)
    plan = make_params([LOGREG])
    with threadpool_limits(2):  # as on a machine with cores to spare
        shards_module.run_shard(plan, small_fs, plan_shards(plan)[0], "cpu")
    assert seen and set(seen) == {1}


def test_sized_runs_change_only_the_sized_defenders_shards(tmp_path: Path) -> None:
    """The plan stage's sized black-box runs key a defender's own shard directory, not the others'."""
    claim = {"name": "mine", "kind": "logistic_regression"}
    asked = make_params([claim, MLP], blackbox={"runs_no_claim": 64})
    sized = dataclasses.replace(asked, sized_runs=(("mine", 32),))
    assert asked.blackbox_runs("mine") == 64 and sized.blackbox_runs("mine") == 32
    assert sized.blackbox_runs("mlp") == asked.blackbox_runs("mlp")
    a = {s.defender: shard_path(tmp_path, asked, s).parent for s in plan_shards(asked)}
    b = {s.defender: shard_path(tmp_path, sized, s).parent for s in plan_shards(sized)}
    assert a["mlp"] == b["mlp"] and a["mine"] != b["mine"]


def test_shards_at_once_counts_the_workers_and_this_process_on_cuda() -> None:
    """What the canaries stage tells its ETA: the local workers (at most one per shard that goes to them), plus the
    stage's own process where it trains batched shards on CUDA beside them; unknown on a Dask cluster."""
    two = make_params([LOGREG, MLP], compute={"n_jobs": 2})
    shards = plan_shards(two)
    assert shards_at_once(two, shards, "cpu") == 2
    assert shards_at_once(two, shards[:1], "cpu") == 1
    assert shards_at_once(two, shards, "cuda") == 3  # MLP shards train here on the GPU, logreg on the 2 workers
    assert shards_at_once(make_params([LOGREG, MLP], compute={"n_jobs": 1}), shards, "cpu") == 1
    assert shards_at_once(make_params([MLP], compute={"scheduler": "tcp://127.0.0.1:8786"}), shards, "cpu") is None


def test_shards_of_the_native_library_and_of_the_torch_path_are_kept_apart(tmp_path: Path, monkeypatch) -> None:
    """DP-SGD's noise on the CPU comes from the native library's streams, or from ``torch.randn`` where it
    is turned off (``PRIVAUDIT_NATIVE=0``) or cannot be built: other numbers, so another shard directory."""
    from privaudit.train import native

    p = make_params([DP])
    native._reset()
    if native.linear_dp_kernel() is None:
        pytest.skip(f"the native library is unavailable here: {native.unavailable_reason()}")
    on = shard_dir(tmp_path, p)
    try:
        monkeypatch.setenv("PRIVAUDIT_NATIVE", "0")
        native._reset()
        off = shard_dir(tmp_path, p)
        monkeypatch.delenv("PRIVAUDIT_NATIVE")
        native._reset()

        def no_compiler(isa=None):  # noqa: ANN001, ANN202
            raise OSError("no C compiler found (test)")

        monkeypatch.setattr(native, "load_kernel", no_compiler)
        with pytest.warns(RuntimeWarning, match="could not be built"):
            unbuilt = shard_dir(tmp_path, p)
    finally:
        native._reset()
    assert off != on and unbuilt == off


def test_the_workers_take_the_longest_planned_shards_first_and_the_eta_knows_the_order() -> None:
    """With planned seconds the workers take the shards longest first by those (a 64-model MLP shard can outlast a
    1000-model DP-SGD one), without them by trials; ``start_lanes`` are the pools the stage's ETA models: the
    workers' order, the plan's order one after the other, on CUDA the batched kinds' shards one after the other in
    the stage beside the workers' pool (processes adding up to ``shards_at_once``); none on Dask."""
    two = make_params([LOGREG, MLP], compute={"n_jobs": 2})
    shards = plan_shards(two)
    planned = {s: (100.0 if s.defender == "mlp" and s.experiment == "game3" else float(s.stop - s.start))
               for s in shards}
    order = dispatch_order(shards, planned)
    assert order[0] == Shard("mlp", "game3", 0, 1) and sorted(order, key=shards.index) == shards
    assert [planned[s] for s in order] == sorted(planned.values(), reverse=True)
    by_trials = dispatch_order(shards)
    assert [s.stop - s.start for s in by_trials] == sorted((s.stop - s.start for s in shards), reverse=True)
    assert dispatch_order(shards, {shards[0]: 1.0}) == by_trials  # not every shard planned: by trials
    assert start_lanes(two, shards, "cpu", planned) == [(2, order)]
    assert start_lanes(make_params([LOGREG, MLP], compute={"n_jobs": 1}), shards, "cpu", planned) == [(1, shards)]
    gpu, cpu = [s for s in shards if s.defender == "mlp"], [s for s in shards if s.defender == "logreg"]
    assert start_lanes(two, shards, "cuda", planned) == [(1, gpu), (2, dispatch_order(cpu, planned))]
    assert sum(w for w, _ in start_lanes(two, shards, "cuda", planned)) == shards_at_once(two, shards, "cuda")
    assert start_lanes(make_params([MLP], compute={"scheduler": "tcp://127.0.0.1:8786"}), shards, "cpu") is None
