"""Flow modules as programs: argparse everywhere (``--help`` never starts a run), no telemetry, overridable keys."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from flows._dvc import EXTERNAL_DATA, ensure_external_data, restored_file

REPO = Path(__file__).resolve().parents[2]
#: every flows module that runs as ``python -m flows.<name>``, with the flow its main() starts
PROGRAMS = {"audit": "audit_flow", "canary_trials": "canary_trials_flow", "validate": "validate_flow",
            "deploy": "serve"}


class FakeFlow:
    """Stands in for a flow: has its ``description``; records calls (or fails them)."""

    def __init__(self, description: str, fail: str | None = None) -> None:
        self.description, self.fail, self.calls = description, fail, []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail:
            pytest.fail(self.fail)
        self.calls.append(kwargs)
        return SimpleNamespace(message="ok", is_completed=lambda: True)


def test_every_program_module_is_listed() -> None:
    with_main = {p.stem for p in (REPO / "flows").glob("*.py") if '__name__ == "__main__"' in p.read_text()}
    assert with_main == set(PROGRAMS)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_help_prints_usage_and_starts_nothing(name: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"flows.{name}")
    real = getattr(module, PROGRAMS[name])
    fake = FakeFlow(getattr(real, "description", None) or "", fail=f"--help started {PROGRAMS[name]}")
    monkeypatch.setattr(module, PROGRAMS[name], fake)
    with pytest.raises(SystemExit) as raised:
        module.main(["--help"])
    assert raised.value.code == 0
    assert f"usage: python -m flows.{name}" in capsys.readouterr().out


def test_canary_trials_arguments_reach_the_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.canary_trials as ct

    fake = FakeFlow(ct.canary_trials_flow.description or "")
    calls = fake.calls
    monkeypatch.setattr(ct, "canary_trials_flow", fake)
    assert ct.main(["tcp://h:8786", "--workers", "3", "--threads", "--no-pipeline", "--device", "cpu"]) == 0
    assert ct.main([]) == 0
    assert calls == [
        {"repo": None, "dask_address": "tcp://h:8786", "n_workers": 3, "processes": False, "device": "cpu",
         "run_pipeline": False, "return_state": True},
        {"repo": None, "dask_address": None, "n_workers": 2, "processes": True, "device": None,
         "run_pipeline": True, "return_state": True},
    ]
    with pytest.raises(SystemExit):
        ct.main(["--workers", "0"])


def test_help_as_a_real_program_and_telemetry_off() -> None:
    """``python -m flows.canary_trials --help`` exits 0 at once; importing ``flows`` opts out of telemetry."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED", "DVC_NO_ANALYTICS", "GX_ANALYTICS_ENABLED"}}
    proc = subprocess.run([sys.executable, "-m", "flows.canary_trials", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m flows.canary_trials")
    code = ("import os, flows\n"
            "from prefect.settings import get_current_settings\n"
            "from prefect._internal.analytics.enabled import is_telemetry_enabled\n"
            "print(os.environ['DO_NOT_TRACK'], os.environ['DVC_NO_ANALYTICS'], os.environ['GX_ANALYTICS_ENABLED'],\n"
            "      get_current_settings().server.analytics_enabled, is_telemetry_enabled())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "1", "False", "False", "False"]


def test_importing_flows_gives_the_ephemeral_server_time_to_start() -> None:
    """A first one-shot flow on 2 loaded cores died after Prefect's 20 s ("Timed out while attempting to connect to
    ephemeral Prefect API server"; the server took 24 s): importing ``flows`` sets 120 s unless the user set it."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"}
    code = ("import flows\n"
            "from prefect.settings import get_current_settings\n"
            "print(get_current_settings().server.ephemeral.startup_timeout_seconds)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["120"]
    mine = {**env, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "45"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=mine, capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == ["45"], proc.stderr


def test_override_blocks_come_from_the_params_model() -> None:
    from flows.audit import STAGE_PREFIXES, AuditOverrides
    from privaudit.config import Params

    assert set(STAGE_PREFIXES) == set(Params.model_fields) >= {"compute", "defenders", "gate", "base"}
    assert AuditOverrides(extra={"compute.n_jobs": 2, "compute.scheduler": "local"}).as_dotted() == {
        "compute.n_jobs": 2, "compute.scheduler": "local"}


def test_restored_file_puts_params_back_even_on_failure(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_bytes(b"ltu:\n  rounds: 1000   # comment kept\n")
    original = params.read_bytes()
    with pytest.raises(RuntimeError):
        with restored_file(params):
            params.write_text("ltu:\n  rounds: 5\n")  # what `dvc exp run -S ltu.rounds=5` does
            raise RuntimeError("stage failed")
    assert params.read_bytes() == original
    with restored_file(tmp_path / "new.yaml"):
        (tmp_path / "new.yaml").write_text("x: 1\n")
    assert not (tmp_path / "new.yaml").exists()


def test_deleted_external_data_folder_is_recreated(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text("stages:\n  ingest:\n    cmd: x\n    deps: [data/external]\n")
    ensure_external_data(tmp_path)
    assert (tmp_path / EXTERNAL_DATA / ".gitkeep").is_file()  # as committed: the lock's hash holds
    (tmp_path / EXTERNAL_DATA / "mine.csv").write_text("a\n")
    ensure_external_data(tmp_path)  # an existing folder is left alone
    assert sorted(p.name for p in (tmp_path / EXTERNAL_DATA).iterdir()) == [".gitkeep", "mine.csv"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "dvc.yaml").write_text("stages: {}\n")
    ensure_external_data(other)
    assert not (other / "data").exists()


@pytest.mark.parametrize(("sets", "words"), [
    (["ltu.round=500"], "ltu.round: unknown key"),
    (["ltu.rounds=0"], "ltu.rounds"),
    (["nosuchblock.x=1"], "override key 'nosuchblock.x' must be '<block>.<key>'"),
    (["ltu.attackers={a: 1}"], "--set ltu.attackers={'a': 1}: a value is a number, a string"),
])
def test_a_bad_override_is_one_line_before_any_flow_starts(sets: list[str], words: str,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m flows.audit -S ltu.round=500`` printed two Prefect tracebacks (about 70 lines) after starting a
    server; a list value (``-S 'ltu.attackers=[loss_gap, rmia]'``) a raw pydantic error. Now: exit 2, one line,
    no flow run; a list is a value like any other."""
    import flows.audit as fa

    def no_flow(**kw: object) -> None:
        pytest.fail("no flow may start on a bad override")

    no_flow.description = fa.audit_flow.description  # type: ignore[attr-defined]
    monkeypatch.setattr(fa, "audit_flow", no_flow)
    argv = [x for s in sets for x in ("-S", s)] + ["--repo", str(REPO)]
    assert fa.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m flows.audit: error: ") and words in err and err.count("\n") == 1, err


def test_a_list_override_is_accepted_and_passed_to_dvc_as_a_list() -> None:
    from flows._dvc import check_params, set_overrides_args
    from flows.audit import AuditOverrides

    dotted = AuditOverrides(extra={"ltu.attackers": ["loss_gap", "rmia"]}).as_dotted()
    assert list(check_params(REPO, dotted).ltu.attackers) == ["loss_gap", "rmia"]
    assert set_overrides_args(dotted) == ["-S", "ltu.attackers=[loss_gap, rmia]"]
