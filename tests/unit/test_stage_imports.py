"""Every stage imports only what it uses: the heavy packages each stage module pulls in at start-up (issue 43).

Each stage is its own Python process under ``dvc repro``; a heavy package imported at module level
(torch, Great Expectations, sklearn, ...) is paid on every run, ``--help`` and argument error included.
For every stage module a fresh interpreter runs ``import stages.<name>`` and then the stage's
``__main__`` with ``--help``, and reports the heavy top-level packages in ``sys.modules`` after each; the
sets must equal :data:`EXPECTED` exactly, so a new top-level import of a heavy package fails here,
and so does a stage that stopped needing one (update the table, and the start-up figures in
``benchmarks/results/stage_startup_cpu.txt`` via ``benchmarks/bench_stage_startup.py``).

A stage may still import a heavy package where it uses it, inside the function (Great Expectations
when it validates, matplotlib when the report renders); this test pins start-up only. The last tests
plant a top-level ``import torch`` two modules deep in a temporary package and show the probe sees it
(and does not see one inside a function).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import ROOT

#: the packages whose import is expensive enough to count (seconds on the 2-core machine under load)
HEAVY: frozenset[str] = frozenset(
    {"torch", "great_expectations", "sklearn", "opacus", "prefect", "dvc", "pandas", "scipy", "matplotlib"})

_NONE: frozenset[str] = frozenset()
#: stage module -> heavy packages its import (and its ``--help``) may load: a stage that reads only JSON
#: loads none; a stage that reads the parquet split/features loads pandas; the canaries and ltu stages
#: train torch reference models from library modules that import torch at their top
EXPECTED: dict[str, frozenset[str]] = {
    "stages._runner": _NONE,
    "stages._audit": _NONE,
    "stages._ltu": frozenset({"pandas", "scipy", "sklearn", "torch"}),  # the attackers (the plan imports it lazily)
    "stages.audit": _NONE,
    "stages.blackbox": _NONE,
    "stages.bounds": _NONE,
    "stages.canaries": frozenset({"pandas", "torch"}),
    "stages.defenders": frozenset({"pandas"}),
    "stages.environment": _NONE,
    "stages.featurize": frozenset({"pandas"}),
    "stages.game3": _NONE,
    "stages.history": _NONE,
    "stages.ingest": frozenset({"pandas"}),
    "stages.lidp": _NONE,
    "stages.ltu": frozenset({"pandas", "scipy", "sklearn", "torch"}),
    "stages.one_run": _NONE,
    "stages.plan": _NONE,
    "stages.report": _NONE,
    "stages.split": frozenset({"pandas"}),
    "stages.user_code": _NONE,
    "stages.whitebox": _NONE,
    "privaudit.cli": _NONE,
}

#: runs in a fresh interpreter: argv[1] the module, argv[2] "main" to run its ``__main__`` with --help too
_PROBE = """
import importlib, json, runpy, sys
heavy = set(json.loads(sys.argv[3]))
def seen():
    return sorted({m.split(".")[0] for m in sys.modules} & heavy)
importlib.import_module(sys.argv[1])
out = {"import": seen()}
if sys.argv[2] == "main":
    sys.argv = [sys.argv[1], "--help"]
    try:
        runpy.run_module(sys.argv[0], run_name="__main__")
    except SystemExit:
        pass
    out["help"] = seen()
print("PROBE " + json.dumps(out))
"""


def heavy_imports(module: str, run_help: bool, path: list[Path] | None = None) -> dict[str, set[str]]:
    """The heavy packages in ``sys.modules`` of a fresh interpreter after ``import module`` (key
    ``import``) and, with ``run_help``, after also running its ``__main__`` with ``--help`` (``help``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*(path or []), ROOT / "src", ROOT])
    proc = subprocess.run([sys.executable, "-c", _PROBE, module, "main" if run_help else "import", json.dumps(sorted(HEAVY))],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, f"probing {module} failed:\n{proc.stderr[-3000:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE "))
    return {k: set(v) for k, v in json.loads(line.removeprefix("PROBE ")).items()}


def test_every_stage_is_in_the_table() -> None:
    """A new stage gets a row (and so a pinned start-up)."""
    stages = {f"stages.{p.stem}" for p in (ROOT / "stages").glob("*.py") if p.stem != "__init__"}
    assert stages == {m for m in EXPECTED if m.startswith("stages.")}


def test_the_stages_that_never_wait_for_a_warm_server_are_light() -> None:
    """``stages.NO_WAIT`` run cold while a warm server still imports: only stages that load nothing heavy."""
    import stages

    assert stages.NO_WAIT and all(EXPECTED[m] == _NONE for m in stages.NO_WAIT)


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_stage_start_up_imports_exactly_the_expected_heavy_packages(module: str) -> None:
    run_help = not module.startswith("stages._")  # the shared runner modules have no __main__
    found = heavy_imports(module, run_help)
    expected = set(EXPECTED[module])
    assert found["import"] == expected, (
        f"`import {module}` loads heavy packages {sorted(found['import'])}, expected {sorted(expected)}: import the "
        "difference inside the function that uses it (or update EXPECTED if the stage now needs it at start-up)")
    if run_help:
        assert found["help"] == expected, f"`python -m {module} --help` loads {sorted(found['help'])}, expected {sorted(expected)}"


def _plant(tmp_path: Path, body: str) -> Path:
    pkg = tmp_path / "planted_stages"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text(body)
    (pkg / "light.py").write_text(
        "import argparse\nfrom planted_stages.helper import work\n\n"
        "if __name__ == '__main__':\n    argparse.ArgumentParser().parse_args()\n")
    return tmp_path


def test_the_probe_sees_a_planted_top_level_torch_import(tmp_path: Path) -> None:
    """The detector detects: a stage-like module two imports away from a top-level ``import torch``."""
    root = _plant(tmp_path, "import torch\n\n\ndef work():\n    return torch.zeros(1)\n")
    found = heavy_imports("planted_stages.light", run_help=True, path=[root])
    assert "torch" in found["import"] and "torch" in found["help"]


def test_the_probe_does_not_see_an_import_inside_a_function(tmp_path: Path) -> None:
    """The same module with the import inside the function that uses it loads no torch at start-up."""
    root = _plant(tmp_path, "def work():\n    import torch\n\n    return torch.zeros(1)\n")
    found = heavy_imports("planted_stages.light", run_help=True, path=[root])
    assert found == {"import": set(), "help": set()}
