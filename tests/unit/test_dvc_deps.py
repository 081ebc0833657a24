"""Every project module a stage's command imports (transitively) is covered by the stage's deps in dvc.yaml.

An import missing from ``deps`` means an edit there serves stale cached results (issue 16). Imports
are read from the AST of each module (function-local imports included); a string constant that
names a project module (the registry's ``TRAINER_MODULES``, the lazy ``__getattr__`` maps of package
``__init__`` files) counts as an import of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.import_graph import ROOT, imports, module_file

STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def imported_files(start: str) -> set[Path]:
    """Project files reached from module ``start`` (parent packages' __init__ included)."""
    seen: set[Path] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ too
            sub = ".".join(parts[:i])
            f = module_file(sub)
            if f is not None and f not in seen:
                seen.add(f)
                todo.extend(imports(f, sub))
    return seen


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_deps_cover_every_imported_project_module(stage: str) -> None:
    cmd = STAGES[stage]["cmd"]
    module = cmd.split("python -m ", 1)[1].split()[0]
    deps = [d if isinstance(d, str) else next(iter(d)) for d in STAGES[stage].get("deps", [])]
    missing = sorted(p.relative_to(ROOT).as_posix() for p in imported_files(module) if not _covered(p, deps))
    # package __init__ files of covered folders are covered by the folder; the top package's is not code
    missing = [m for m in missing if m not in ("src/privaudit/__init__.py", "stages/__init__.py")]
    assert not missing, f"dvc.yaml stage {stage!r} imports {missing} but does not list them in deps"


def test_the_deps_test_sees_a_missing_dep() -> None:
    """The checker itself: the report stage reaches the gate's claim comparison through imports."""
    files = {p.relative_to(ROOT).as_posix() for p in imported_files("stages.report")}
    assert "src/privaudit/verdict/claim_check.py" in files and "src/privaudit/verdict/gate.py" in files
    assert not _covered(ROOT / "src/privaudit/verdict/claim_check.py", ["src/privaudit/report"])
