"""``privaudit verdict``: output and exit codes (0 pass, 1 fail, 2 missing/corrupt/stale)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from privaudit.cli import main, print_verdict
from privaudit.artifacts import write_json
from privaudit.repro.environment import environment_manifest
from privaudit.repro.provenance import provenance_stamp
from tests.lockfiles import write_consistent_lock
from tests.report import synthetic

SRC = Path(__file__).resolve().parents[2] / "src"

#: a two-stage pipeline: ``ltu`` writes the report's input, ``report`` writes the gate
DVC_YAML = """stages:
  environment:
    cmd: python -m stages.environment
    always_changed: true
    outs: [data/environment.json]
  ltu:
    cmd: python -m stages.ltu
    deps: [stages/ltu.py, data/environment.json]
    params: [ltu.rounds]
    metrics: [metrics/ltu.json]
  report:
    cmd: python -m stages.report
    deps: [stages/report.py, metrics/ltu.json]
    params: [gate.min_privacy]
    metrics: [metrics/gate.json]
"""


def make_repo(root: Path, rounds: int = 100, ltu: str = '{"logreg": {}}') -> Path:
    """A finished pipeline at ``root``: dvc.yaml, params.yaml, a consistent dvc.lock, the report's input."""
    (root / "metrics").mkdir(parents=True, exist_ok=True)
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "params.yaml").write_text(f"ltu:\n  rounds: {rounds}\ngate:\n  min_privacy: 0.2\n")
    (root / "metrics" / "ltu.json").write_text(ltu)
    write_json(root / "data" / "environment.json", environment_manifest())
    write_consistent_lock(root)  # as `dvc repro` leaves it (the gate itself is written after it)
    return root


def write_gate(tmp_path: Path, metrics: dict[str, Any], stamp: bool = True, **params: Any) -> Path:
    """Evaluate the gate on ``metrics`` and write ``metrics/gate.json`` under ``tmp_path``.

    With ``stamp``, ``tmp_path`` is made a finished pipeline (:func:`make_repo`) and the gate
    carries its provenance block, as the report stage writes it.
    """
    gate = synthetic.gate_of(metrics, **params).to_json()
    if stamp:
        make_repo(tmp_path)
        gate["provenance"] = provenance_stamp(tmp_path, "report")
    path = tmp_path / "metrics" / "gate.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gate), encoding="utf-8")
    return path


def test_fail_exits_1_and_prints_reasons(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, metrics)
    assert main(["verdict", "--gate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("privaudit verdict: FAIL\n")
    assert "  FAIL  logreg\n" in out and "  PASS  dp_sgd\n" in out
    assert "- logreg: LTU privacy (attacker model_diff) - stderr" in out
    assert "\x1b[" not in out  # plain when not a terminal


def test_pass_exits_0(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, metrics, min_privacy=0.0)
    assert main(["verdict", "--gate", str(path)]) == 0
    assert capsys.readouterr().out.startswith("privaudit verdict: PASS\n")


def test_default_path_is_metrics_gate_json(
    tmp_path: Path, metrics: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_gate(tmp_path, metrics, min_privacy=0.0)
    monkeypatch.chdir(tmp_path)
    assert main(["verdict"]) == 0


def test_default_gate_is_found_from_a_subdirectory(
    tmp_path: Path, metrics: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cd docs && privaudit verdict`` reads the repository's gate (the nearest folder holding dvc.yaml above the
    working directory), as git and dvc find their repository; it said the gate did not exist."""
    write_gate(tmp_path, metrics, min_privacy=0.0)
    (tmp_path / "docs" / "howto").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "docs" / "howto")
    assert main(["verdict"]) == 0
    assert capsys.readouterr().out.startswith("privaudit verdict: PASS\n")


def test_default_gate_outside_any_repository_says_where_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["verdict"]) == 2
    err = capsys.readouterr().err
    assert "gate file metrics/gate.json does not exist" in err
    assert f"no dvc.yaml in {tmp_path} or above it: run privaudit inside the audit's repository" in err


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path, metrics: dict[str, Any]) -> None:
    """``privaudit verdict | head -1``: the reader is gone before the verdict is written (here ``true``, which exits
    before privaudit has imported); no BrokenPipeError traceback, and the exit code is still the verdict's (1)."""
    path = write_gate(tmp_path, metrics)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    script = f"{sys.executable} -m privaudit.cli verdict --gate {path} | true; echo \"status ${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.stdout == "status 1\n", (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope" / "gate.json"
    assert main(["verdict", "--gate", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "does not exist" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "must be an object"),
        ('{"passed": "no", "reasons": [], "defenders": {}}', ".passed: Input should be a valid boolean"),
        (
            '{"passed": true, "reasons": [], "defenders": {"a": {"passed": true}}}',
            ".defenders.a.reasons: Field required",
        ),
        (b"\xff\xfe\x00garbage", "cannot be read"),
    ],
)
def test_corrupt_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, message: str
) -> None:
    path = tmp_path / "gate.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    assert main(["verdict", "--gate", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_no_subcommand_and_unknown_subcommand_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "verdict" in capsys.readouterr().err
    assert main(["nonsense"]) == 2


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verdict", "--help"]) == 0
    assert "--gate" in capsys.readouterr().out


def test_rich_output_escapes_markup(metrics: dict[str, Any]) -> None:
    """Rich output shows the verdict and does not interpret markup in defender names."""
    metrics["ltu"]["[bold]evil[/bold]"] = metrics["ltu"].pop("logreg")
    gate = synthetic.gate_of(metrics)
    out = io.StringIO()
    print_verdict(gate, out, use_rich=True)
    text = out.getvalue()
    assert "FAIL" in text and "\x1b[" in text
    assert "[bold]evil[/bold]" in text


def test_forced_rich_flag(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, metrics)
    assert main(["verdict", "--rich", "--gate", str(path)]) == 1
    assert "\x1b[" in capsys.readouterr().out


def test_real_process_exit_code(tmp_path: Path, metrics: dict[str, Any]) -> None:
    """The module runs as a program and its exit status is the verdict."""
    path = write_gate(tmp_path, metrics)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "privaudit.cli", "verdict", "--gate", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "FAIL" in proc.stdout


# ----------------------------------------------------------------------------- provenance (issue 15, item 3)


def test_fresh_gate_passes_from_any_directory(
    tmp_path: Path, metrics: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repository is found above the gate file; the working directory does not matter."""
    path = write_gate(tmp_path / "repo", metrics, min_privacy=0.0)
    monkeypatch.chdir(tmp_path)
    assert main(["verdict", "--gate", str(path)]) == 0
    assert capsys.readouterr().out.startswith("privaudit verdict: PASS\n")


def test_stale_gate_is_refused_with_exit_2(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed `dvc exp run -S ltu.rounds=500`: params moved, the ltu stage never ran with them."""
    path = write_gate(tmp_path, metrics, min_privacy=0.0)
    (tmp_path / "params.yaml").write_text("ltu:\n  rounds: 500\ngate:\n  min_privacy: 0.2\n")
    assert main(["verdict", "--gate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no stale PASS printed
    assert "is stale: params.yaml ltu.rounds changed (stage 'ltu' ran with 100, now 500)" in captured.err
    assert "run `dvc repro`" in captured.err and "--no-check" in captured.err
    # --no-check prints the stored verdict anyway
    assert main(["verdict", "--no-check", "--gate", str(path)]) == 0
    assert capsys.readouterr().out.startswith("privaudit verdict: PASS\n")


def test_changed_report_input_is_refused(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, metrics)
    (tmp_path / "metrics" / "ltu.json").write_text('{"logreg": {"privacy": 0.9}}')
    assert main(["verdict", "--gate", str(path)]) == 2
    assert "metrics/ltu.json changed since the gate was computed" in capsys.readouterr().err


def test_gate_without_provenance_is_refused(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """An older gate.json (no provenance block) cannot be tied to the workspace: rerun the report."""
    path = write_gate(tmp_path, metrics, stamp=False, min_privacy=0.0)
    assert main(["verdict", "--gate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no provenance block" in err and "dvc repro" in err and "rerun the report stage" in err
    assert main(["verdict", "--no-check", "--gate", str(path)]) == 0


def test_explicit_repo_is_used(tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """A gate copied out of its repository is checked against ``--repo``."""
    path = write_gate(tmp_path / "repo", metrics, min_privacy=0.0)
    copy = tmp_path / "elsewhere" / "gate.json"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    assert main(["verdict", "--gate", str(copy), "--repo", str(tmp_path / "repo")]) == 0
    make_repo(tmp_path / "other", ltu='{"mlp": {}}')  # another audit's results
    assert main(["verdict", "--gate", str(copy), "--repo", str(tmp_path / "other")]) == 2
    assert "metrics/ltu.json changed" in capsys.readouterr().err


# --------------------------------------------------------------------------- warnings


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def passing_with_warning(metrics: dict[str, Any], warning: bool = True) -> dict[str, Any]:
    """Synthetic metrics whose gate passes; ``dp_bare`` carries the GDP-view warning if ``warning``."""
    m = synthetic.with_blackbox(metrics)
    for kind in ("ltu", "audit", "bounds"):
        del m[kind]["logreg"]
    if not warning:
        m["audit"]["dp_bare"]["blackbox"]["gdp_warning"] = None
    return m


def test_warning_follows_the_verdict_line(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, passing_with_warning(metrics))
    assert main(["verdict", "--gate", str(path)]) == 0  # a warning is not a failure
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "privaudit verdict: PASS"
    assert lines[1] == f"WARNING: defender dp_bare: {synthetic.GDP_WARNING}"
    assert sum(line.startswith("WARNING") for line in lines) == 1
    assert lines[2:] == ["  PASS  dp_sgd", "  PASS  dp_bare"]


def test_no_warning_no_warning_line(
    tmp_path: Path, metrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_gate(tmp_path, passing_with_warning(metrics, warning=False))
    assert main(["verdict", "--gate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("privaudit verdict: PASS\n") and "WARNING" not in out


@pytest.mark.parametrize("warning", [True, False])
def test_rich_warning_follows_the_verdict_line(metrics: dict[str, Any], warning: bool) -> None:
    gate = synthetic.gate_of(passing_with_warning(metrics, warning))
    out = io.StringIO()
    print_verdict(gate, out, use_rich=True)
    text = ANSI.sub("", out.getvalue())
    assert text.splitlines()[0].strip().startswith("PASS")
    if warning:
        # the second line starts the warning, before the per-defender table
        assert text.splitlines()[1].split()[:3] == ["WARNING", "defender", "dp_bare:"]
        assert text.index("WARNING") < text.index("Defender")
        assert "declare the mechanism in params.yaml" in " ".join(text.split())
    else:
        assert "WARNING" not in text


def test_make_verdict_names_the_verdicts_own_exit_code(tmp_path: Path, metrics: dict[str, Any]) -> None:
    """Issue 34: `make audit`/`make verdict` exit with make's code 2 on a failed gate; the README says so and
    the last line names the verdict's own code (1 = failed), which scripts read from privaudit verdict."""
    import shutil

    venv = Path(sys.prefix)
    if not (venv / ".privaudit-installed").is_file():
        pytest.skip(f"not running from a `make setup` venv ({venv} has no .privaudit-installed)")
    write_gate(tmp_path, metrics)
    repo = Path(__file__).resolve().parents[2]
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(repo / name, tmp_path / name)
    os.utime(tmp_path / "pyproject.toml", (0, 0))  # older than the venv's stamp: `setup` has nothing to do
    proc = subprocess.run(["make", "-s", "verdict", f"VENV={venv}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "privaudit verdict: FAIL" in out and "privaudit verdict exited 1 (the release gate failed)" in out, out
