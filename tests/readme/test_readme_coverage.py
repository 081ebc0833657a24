"""Every command and code block of README.md and of the user guide (docs/) is run by a test, or excluded here with the reason.

:data:`COVERAGE` maps each README command (a regex over the whitespace-collapsed text, see
:mod:`tests.readme.commands`) to the tests that run it, or to ``EXCLUDED`` with why no test can.
The check fails when the README gains a command no entry matches, when an entry matches nothing
(a stale entry), and when a named test does not exist. Add a test (or a reasoned exclusion) with
every new README command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.readme.commands import doc_snippets, readme_snippets

ROOT = Path(__file__).resolve().parents[2]

EXCLUDED = "EXCLUDED: "
BLOCKS = "tests/readme/test_readme_blocks.py::"
GO_BACK = "tests/pipeline/test_user_code_and_go_back.py::test_user_code_is_tracked_hashed_and_an_audit_can_be_gone_back_to"
REVIEW = "tests/readme/test_review_commands.py::test_review_an_audit_as_the_readme_shows"
ONE_SHOT = "tests/readme/test_one_shot_flows.py::"
SERVER = "tests/flows/test_server.py::test_real_server_deployments_have_scheduled_runs"
MAKE = (EXCLUDED + "a Makefile target (make setup + the tested command; CI runs `make test`, which is this suite; "
        "setup is measured from fresh clones, README 'Quickstart'); the target exists: "
        + BLOCKS + "test_every_make_target_the_readme_names_exists")
BENCH = (EXCLUDED + "a benchmark prints measurements and runs minutes to hours (README: benchmarks are never timed "
         "tests; outputs in benchmarks/results/); its flags are checked by " + BLOCKS + "test_readme_benchmark_commands_parse")
DOCS = "tests/docs/test_doc_blocks.py::"
WALK = "tests/pipeline/test_readme_walk.py::test_the_newcomers_readme_walk"
GPU = EXCLUDED + "needs a CUDA machine (benchmarks/gpu_check.sh; results in benchmarks/results/gpu/)"

#: (regex over a README command or "block:<lang> <first line>", the tests that run it or EXCLUDED: why)
COVERAGE: list[tuple[str, tuple[str, ...] | str]] = [
    # --- the pipeline
    (r"dvc repro", ("tests/pipeline/test_end_to_end.py::test_pipeline_end_to_end",)),
    (r"dvc repro --force", ("tests/pipeline/test_end_to_end.py::test_pipeline_end_to_end",)),
    (r"dvc repro -f -s ingest", EXCLUDED + "forces the ingest stage after data outside data/external changed; the "
     "warning that names this fix: tests/data/test_ingest_tracking.py::test_paths_elsewhere_get_a_warning_naming_the_fix; "
     "--force -s: tests/pipeline/test_small_datasets.py"),
    (r"dvc status", ("tests/pipeline/test_end_to_end.py::test_pipeline_end_to_end",)),
    (r"cp examples/params-all-defenders\.yaml params\.yaml && dvc repro defenders",
     ("tests/defenders/test_all_defenders_pipeline.py::test_every_kind_trains_through_dvc",
      "tests/unit/test_example_params.py::test_example_holds_every_key_dvc_yaml_lists")),
    (r"python -m stages\.<name>", EXCLUDED + "the form of every dvc.yaml `cmd` (a pattern, not a command); run by "
     "every pipeline test"),
    (r"python -m stages\.lidp --self-check 2", (BLOCKS + "test_lidp_self_check_command",)),
    (r"python -m stages\.<name> --help", ("tests/unit/test_stage_imports.py::"
                                          "test_stage_start_up_imports_exactly_the_expected_heavy_packages",)),
    # --- verdict
    (r"privaudit warm -- dvc (repro|exp run -S ltu\.rounds=2000)",
     ("tests/pipeline/test_end_to_end.py::test_pipeline_end_to_end",
      "tests/warm/test_warm_stages.py::test_privaudit_warm_runs_the_command_and_returns_its_exit_code")),
    (r"\.venv/bin/privaudit warm -- \.venv/bin/dvc repro",
     ("tests/warm/test_warm_stages.py::test_privaudit_warm_runs_the_stages_with_its_own_python",)),
    (r"(\.venv/bin/)?privaudit verdict", ("tests/report/test_cli.py::test_real_process_exit_code",
                                          "tests/pipeline/test_end_to_end.py::test_pipeline_end_to_end", WALK)),
    (r"make (audit|test|verdict|test-all|test-server|setup)( TORCH_INDEX=\S+)?", MAKE),
    # --- the ledger of releases (docs/howto/release-ledger.md)
    (r"(\.venv/bin/)?privaudit release( <defender>| dpsgd_eps1)?",
     ("tests/report/test_cli_release.py::test_the_guide_commands_run_as_a_program",)),
    (r'git add releases\.yaml && git commit -m "release dpsgd_eps1"',
     ("tests/report/test_cli_release.py::test_the_guide_commands_run_as_a_program",)),
    (r"block:yaml # params\.yaml: a total budget over the releases of one data set",
     (DOCS + "test_total_budget_block_is_valid_params",)),
    # --- setup and shell state
    (r"git clone <this repository> privaudit && cd privaudit", EXCLUDED + "needs the network and a placeholder URL; "
     "a fresh clone's make audit/make test are measured by hand (README 'Quickstart', 'Tests')"),
    (r"source \.venv/bin/activate", EXCLUDED + "changes the calling shell only (PATH); the tests run with the venv's "
     "interpreter and put its bin first on PATH (tests/pipeline/conftest.py::pipeline_env)"),
    # --- experiments and review (README 'Changing parameters', 'Reviewing an audit')
    (r"dvc exp run -S ltu\.rounds=2000 -S lidp\.trials=64", (REVIEW,)),
    (r"dvc exp run -S 'ltu\.attackers=\[loss_gap,retrain,lira,rmia\]'", (REVIEW,)),
    (r"dvc exp run -S ltu\.rounds=3000 -n more-rounds", (REVIEW,)),
    (r"dvc exp run( -S key=value \.\.\.| --force)?", (REVIEW, "tests/flows/test_audit.py::test_force_and_overrides_reach_dvc",
                                                   ONE_SHOT + "test_validate_one_shot_audits_and_records")),
    (r"dvc exp show( --md --drop .*)?", (REVIEW, WALK)),
    (r"dvc params diff", (REVIEW,)),
    (r"dvc metrics diff( --precision 3)?", (REVIEW, WALK)),
    (r"dvc plots diff( HEAD -o dvc_plots_diff)?", (REVIEW,)),
    (r"dvc metrics diff --targets metrics/audit\.json", ("tests/report/test_summary.py::test_dvc_metrics_diff_fits_one_screen",)),
    (r"dvc metrics diff --targets metrics/ltu\.json metrics/audit\.json metrics/bounds\.json metrics/gate\.json",
     ("tests/report/test_summary.py::test_dvc_metrics_diff_fits_one_screen",)),
    # --- going back, own trainers under git (README 'Going back to an earlier audit', 'Defenders')
    (r"git checkout HEAD -- params\.yaml dvc\.lock metrics", (REVIEW, GO_BACK, WALK)),
    (r"git checkout <rev>", (GO_BACK,)),
    (r"dvc checkout --allow-missing && dvc repro", (REVIEW, GO_BACK, WALK)),
    (r"dvc checkout --allow-missing", (GO_BACK,)),
    (r"dvc checkout", EXCLUDED + "named as the recipe that fails in a fresh clone; that it fails and the verdict "
     "then refuses: " + GO_BACK),
    (r"git add", (GO_BACK,)),
    (r"dvc exp run --temp", EXCLUDED + "the same experiment machinery as dvc exp run (REVIEW); what matters here, an "
     "untracked trainer refused before any experiment: " + GO_BACK),
    (r"dvc exp apply", (REVIEW,)),
    (r"dvc exp remove more-rounds", (REVIEW,)),
    (r"dvc exp apply <name>", (REVIEW, WALK)),
    # --- canaries scale-out
    (r"dvc exp run -S compute\.scheduler=tcp://host:8786", EXCLUDED + "needs a Dask scheduler at the address; the stage "
     "on a Dask cluster: tests/canaries/test_shards.py::test_dask_local_cluster_gives_the_local_results, the flow: "
     "tests/flows/test_canary_trials.py::test_shards_on_an_existing_dask_cluster_match_the_stage"),
    (r"rm -r data/\.shards", (ONE_SHOT + "test_canary_trials_one_shot_after_removing_the_shards",)),
    # --- flows: one-shot (no server) and scheduled (a real local server)
    (r"python -m flows\.audit \[-S ltu\.rounds=500\]", (ONE_SHOT + "test_audit_one_shot",)),
    (r"python -m flows\.validate PATH --dataset-name csv --label-column label",
     (ONE_SHOT + "test_validate_one_shot_audits_and_records",
      "tests/flows/test_validate.py::test_one_shot_command_audits_here_without_a_deployment")),
    (r"python -m flows\.canary_trials \[tcp://scheduler:8786\]",
     (ONE_SHOT + "test_canary_trials_one_shot_after_removing_the_shards",)),
    (r"\.venv/bin/prefect config set PREFECT_API_URL=\S+ PREFECT_SERVER_ANALYTICS_ENABLED=false", (SERVER,)),
    (r"\.venv/bin/prefect server start --host 127\.0\.0\.1 --port 4200", (SERVER,)),
    (r"\.venv/bin/python -m flows\.deploy --timezone Europe/Berlin", (SERVER, "tests/flows/test_deploy.py::test_deployments_as_code")),
    (r"python -m flows\.deploy --drop-path \S+ --dataset-name csv --label-column label",
     ("tests/flows/test_deploy.py::test_drop_defaults_follow_params_yaml", "tests/flows/test_validate.py::test_good_drop_starts_the_audit_once_per_content")),
    (r"\.venv/bin/prefect (deployment ls|flow-run ls --state SCHEDULED --limit 10)", (SERVER,)),
    (r"\.venv/bin/prefect deployment run privaudit-validate-data/hourly-data-validation",
     ("tests/flows/test_validate.py::test_good_drop_starts_the_audit_once_per_content",)),
    (r"\.venv/bin/prefect deployment run privaudit-audit/nightly-audit --param overrides=.*",
     ("tests/flows/test_audit.py::test_overrides_map_to_dvc_set_arguments", "tests/flows/test_audit.py::test_force_and_overrides_reach_dvc")),
    (r"python -m flows\.deploy --blackbox-runs 10000",
     ("tests/flows/test_deploy.py::test_blackbox_runs_flag_makes_the_nightly_audit_deep",)),
    (r"dvc exp run -S blackbox\.runs=10000", EXCLUDED + "the deep audit trains 20,000 heads (minutes); the key it sets: "
     "tests/blackbox/test_blackbox_audit.py::test_runs_per_side_follow_the_kind_and_the_claim, `dvc exp run -S` itself: "
     + REVIEW),
    # --- benchmarks and GPU
    (r"python -m benchmarks\.bench_blackbox_honest.*", BENCH),
    (r"python -m benchmarks\.bench_heavy_trainer.*", BENCH),
    (r"python benchmarks/bench_claim_curves\.py --audits 500 --runs 320 --workers 2", BENCH),
    (r"python benchmarks/bench_claim_tightness\.py --audits \d+", BENCH),
    (r"python benchmarks/bench_blackbox_catalogue\.py --claims 1 4 --seeds 5 --ladder 40 320 --scale 30 --level 0\.00833 --curves gdp eps_delta declared", BENCH),
    (r"python benchmarks/(ltu_table1|bench_ltu_retrain|bench_sample_risk)\.py( --dataset digits)?", BENCH),
    (r"(DEVICE=cpu )?bash benchmarks/gpu_check\.sh( tests audit)?", GPU),
    (r"python benchmarks/bench_scale\.py --data params", BENCH),
    (r"python benchmarks/bench_scale\.py \[--n 10000 --d 128 --k 10\] \[--device cuda\] \[--timeout S\] \[--profile STAGE\]",
     ("tests/pipeline/test_bench_scale.py::test_a_small_run_records_every_stage",
      "tests/pipeline/test_bench_scale.py::test_a_cut_off_run_names_the_stage_it_stopped_in")),
    # --- the user guide (docs/): defender keys with -S, the Defender-set size, the site itself
    (r"dvc exp run -S '\+?defenders(\.1|\[1\])\.\w+=\S+'", (DOCS + "test_defender_key_overrides_as_dvc_applies_them",
                                                       REVIEW, WALK)),
    (r"dvc repro split", (WALK,)),
    (r"python -c \"import pandas as pd; print\(\(pd\.read_parquet\('data/split/membership\.parquet'\)\.role == "
     r"'defender'\)\.sum\(\)\)\"", (DOCS + "test_the_n_defender_command_counts_the_defender_rows", WALK)),
    (r"block:yaml dataset:", (DOCS + "test_dataset_block_is_valid_params", WALK)),
    (r"block:yaml # params\.yaml: an audit on one GPU, with a budget", (DOCS + "test_gpu_block_is_valid_params",)),
    (r"python -c \"from opacus\.accountants\.utils import get_noise_multiplier as g; .*\"",
     (DOCS + "test_the_declared_opacus_entry_states_the_numbers_the_guide_derives", WALK)),
    (r"block:yaml # params\.yaml: your opacus loop with its declared mechanism .*",
     (DOCS + "test_the_declared_opacus_entry_states_the_numbers_the_guide_derives", WALK)),
    (r"mkdocs build --strict", ("tests/docs/test_mkdocs.py::test_the_guide_builds_strictly",)),
    (r"mkdocs serve", EXCLUDED + "serves the site until stopped; what it serves is built by "
     "tests/docs/test_mkdocs.py::test_the_guide_builds_strictly"),
    (r"pip install -e '\.\[test\]'", EXCLUDED + "installs packages (network); `make setup` runs it, and CI runs "
     "the suite in the venv it made; the extra's mkdocs pins: tests/docs/test_mkdocs.py::test_the_guide_builds_strictly"),
    (r"python -m stages\.lidp --self-check", EXCLUDED + "the architecture names the flag (an ε argument follows); "
     "the full command: " + BLOCKS + "test_lidp_self_check_command"),
    (r"git add <files>", (GO_BACK,)),
    (r"git checkout <rev> -- dvc\.lock metrics", ("tests/pipeline/test_user_code_and_go_back.py::"
                                                  "test_user_code_is_tracked_hashed_and_an_audit_can_be_gone_back_to",)),
    (r"pip install -U opacus", ("tests/unit/test_environment.py::test_a_gate_computed_under_other_versions_is_stale",
                                "tests/unit/test_environment.py::test_changes_name_the_package_and_both_versions")),
    (r"dvc exp run -S ltu\.rounds=500", ("tests/planning/test_plan_stage.py::test_the_sizes_file_depends_on_neither_ltu_params_nor_timings",
                                          REVIEW)),
    (r"dvc metrics", EXCLUDED + "DVC's command group named in prose; its subcommands: " + REVIEW),
    (r"python -m flows\.validate", (ONE_SHOT + "test_validate_one_shot_audits_and_records",)),
    (r"block:text flows/ \(Prefect\) .*", EXCLUDED + "a diagram of the layers in docs/architecture.md, not a command"),
    (r"block:yaml # params\.yaml: your opacus loop, audited white-box",
     (BLOCKS + "test_readme_defenders_yaml_block_is_valid_params",)),
    # --- the audit history (README 'Privacy over time', docs/howto/audit-history.md)
    (r"(\.venv/bin/)?privaudit history( --defender \S+ --json)?",
     ("tests/history/test_stage.py::test_a_planted_package_downgrade_is_flagged_in_the_record_page_and_cli",)),
    (r"git log refs/privaudit/history", ("tests/history/test_store.py::test_append_then_read_round_trips_every_field",)),
    (r"git (push origin refs/privaudit/history|fetch origin refs/privaudit/history:refs/privaudit/history)",
     ("tests/history/test_store.py::test_the_history_is_shared_by_push_and_fetch",)),
    # --- code blocks
    (r"block:python import numpy as np, torch", (BLOCKS + "test_readme_opacus_trainer_block_trains",
                                                "tests/whitebox/test_user_example.py::test_readme_user_trainer_is_audited_tightly_and_passes")),
    (r"block:yaml defenders:", (BLOCKS + "test_readme_defenders_yaml_block_is_valid_params",)),
    (r"block:yaml # params.yaml: a pure-DP trainer that declares its mechanism",
     (BLOCKS + "test_readme_declared_mechanism_block_is_read_by_dvc_and_config",)),
    (r"block:text stage defenders failed: validation suite 'features' failed:",
     ("tests/catalogue/test_stage_inputs.py::test_nan_and_inf_features",)),
]


def _key(snippet) -> str:  # type: ignore[no-untyped-def]
    return snippet.text if snippet.kind == "command" else f"{snippet.kind} {snippet.text}"


def _entries_for(key: str) -> list[int]:
    return [i for i, (pattern, _) in enumerate(COVERAGE) if re.fullmatch(pattern, key)]


def test_every_readme_command_is_covered_or_excluded_with_a_reason() -> None:
    snippets = doc_snippets()
    assert len(snippets) > 40 and any(s.kind == "block:python" for s in snippets)
    uncovered = [str(s) for s in snippets if not _entries_for(_key(s))]
    assert not uncovered, "README/guide commands no test runs (add a test and a COVERAGE entry):\n" + "\n".join(uncovered)


def test_no_stale_entries() -> None:
    keys = {_key(s) for s in doc_snippets()}
    stale = [pattern for pattern, _ in COVERAGE if not any(re.fullmatch(pattern, k) for k in keys)]
    assert not stale, f"COVERAGE entries that match no README or guide command: {stale}"


@pytest.mark.parametrize("pattern, covered_by", COVERAGE, ids=[p for p, _ in COVERAGE])
def test_named_tests_exist(pattern: str, covered_by: tuple[str, ...] | str) -> None:
    named = re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", covered_by if isinstance(covered_by, str) else " ".join(covered_by))
    if isinstance(covered_by, str):
        assert covered_by.startswith(EXCLUDED) and len(covered_by) > len(EXCLUDED) + 20, "an exclusion needs a reason"
    else:
        assert named and len(named) == len(covered_by)
    for path, name in named:
        source = ROOT / path
        assert source.is_file(), path
        if name:
            assert re.search(rf"^def {name}\(", source.read_text(encoding="utf-8"), flags=re.M), f"{path}::{name}"


def test_the_coverage_check_can_fail(tmp_path: Path) -> None:
    """A README with a command no entry covers is reported (the check is not vacuous)."""
    readme = tmp_path / "README.md"
    readme.write_text("Run `dvc repro` and then\n\n```bash\npython -m flows.brand_new --fast\n```\n")
    keys = [_key(s) for s in readme_snippets(readme)]
    assert keys == ["dvc repro", "python -m flows.brand_new --fast"]
    assert _entries_for(keys[0]) and not _entries_for(keys[1])


#: every file of examples/ and the tests that run it (a new example needs a test here)
EXAMPLES: dict[str, tuple[str, ...]] = {
    "params-all-defenders.yaml": ("tests/unit/test_example_params.py::test_example_is_accepted_by_load_params",
                                  "tests/defenders/test_all_defenders_pipeline.py::test_every_kind_trains_through_dvc"),
    "user_trainer.py": ("tests/defenders/test_user.py",),
    "opacus_user_trainer.py": ("tests/whitebox/test_user_example.py::test_readme_user_trainer_is_audited_tightly_and_passes",),
    "noisy_sums_trainer.py": ("tests/claims/test_declared_mechanisms.py::test_an_honest_laplace_trainer_is_not_refuted_declared_or_not",),
}


def test_every_example_file_is_run_by_a_test() -> None:
    files = {p.name for p in (ROOT / "examples").iterdir() if p.is_file() and not p.name.startswith(".")}
    assert files == set(EXAMPLES), f"examples/ files without a test entry: {sorted(files ^ set(EXAMPLES))}"
    for name, tests in EXAMPLES.items():
        for item in tests:
            path, _, test = item.partition("::")
            text = (ROOT / path).read_text(encoding="utf-8")
            assert f"examples/{name}" in text or name.removesuffix(".py") in text, (name, path)
            assert not test or re.search(rf"^def {test}\(", text, flags=re.M), item
