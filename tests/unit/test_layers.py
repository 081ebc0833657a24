"""The folders are the architecture (issue 36): the top-level parts of ``src/privaudit``, their layers, and
every forbidden arrow between them, read from the AST (function-local imports included).

A *part* is a sub-package (``verdict``, ``audits``, …) or a top-level module (``config``, ``hooks``, …). The
layer of a part is the length of the longest import chain below it; the parts form a DAG
(``tests/unit/test_import_cycles.py`` checks modules and parts for cycles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import networkx as nx

from tests.import_graph import ROOT, imports, module_file

SRC = ROOT / "src" / "privaudit"
MAX_PARTS = 25
MAX_LAYERS = 8

#: part -> parts it must never import
_ALL = {"artifacts", "attacks", "audits", "canaries", "claims", "cli", "compat", "config", "data", "defenders",
        "features", "history", "hooks", "losses", "messages", "planning", "progress", "report", "repro",
        "seeding", "stats", "testing", "train", "validation", "verdict"}
FORBIDDEN: dict[str, set[str]] = {
    "stats": _ALL - {"stats"},  # pure statistics: numpy/scipy only
    # what a claim is (and the ledger of releases): above the statistics and the leaf modules (atomic writes,
    # message caps), below everything that decides, audits, trains, plans, renders or keeps the history
    "claims": _ALL - {"claims", "stats", "artifacts", "messages"},
    # the history records what the typed metrics say: it reads, never audits, trains, renders the report or reads params
    "history": {"audits", "attacks", "canaries", "train", "defenders", "planning", "features", "data", "config",
                "hooks", "cli", "report", "validation", "testing"},
    "progress": _ALL - {"progress"},  # the progress bar: stdlib (and tqdm) only, so any layer may show one
    "verdict": {"audits", "report", "config", "testing", "attacks", "canaries", "train", "defenders", "planning",
                "features", "data", "repro", "hooks", "cli", "history"},  # decides, never trains, renders or reads params
    "repro": {"verdict", "audits", "report", "testing", "config", "canaries", "attacks", "defenders", "train",
              "history"},
    # the progress bar is ``privaudit.progress`` (issue 45): nothing below the planner imports ``planning``
    "attacks": {"config", "audits", "verdict", "report", "testing", "planning"},
    "canaries": {"config", "audits", "verdict", "report", "testing", "planning"},
    "defenders": {"config", "audits", "report", "testing", "planning", "canaries", "attacks"},
    "train": {"config", "audits", "verdict", "report", "testing", "canaries", "attacks", "defenders",
              "planning"},  # knows no zoo
    "planning": {"config", "audits", "verdict", "report", "testing"},
    "config": {"audits", "report", "attacks", "canaries", "train", "testing"},
    "audits": {"report", "testing", "config"},
    "report": {"audits", "attacks", "canaries", "train", "defenders", "testing", "planning", "hooks", "config",
               "history"},
    # the GX suites are the artifacts' contracts: above ``artifacts`` and the source data type, below every reader
    "validation": _ALL - {"validation", "artifacts", "data"},
}
for _part in _ALL - {"testing"}:  # the shared test fixtures sit on top: nothing in the package imports them
    FORBIDDEN.setdefault(_part, set()).add("testing")



def part_of(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    return rel.parts[0]


def module_edges() -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(part, part) -> the (file, file) imports behind that arrow, files relative to ``src/privaudit``."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(ROOT / "src").with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        for name in imports(path, ".".join(parts), by_name=False):
            target = module_file(name)
            if target is None or target == path or part_of(target) == part_of(path):
                continue
            out.setdefault((part_of(path), part_of(target)), set()).add(
                (path.relative_to(SRC).as_posix(), target.relative_to(SRC).as_posix()))
    return out


def violations(edges: Mapping[tuple[str, str], Iterable[tuple[str, str]]], forbidden: Mapping[str, set[str]]) -> list[str]:
    """Every file import behind a forbidden arrow."""
    return sorted(f"{a} -> {b}" for (src, dst), files in edges.items() if dst in forbidden.get(src, set())
                  for a, b in files)


def layers(edges: Iterable[tuple[str, str]], parts: Iterable[str]) -> int:
    g = nx.DiGraph()
    g.add_nodes_from(parts)
    g.add_edges_from(edges)
    return nx.dag_longest_path_length(g) + 1


def _parts() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in SRC.iterdir()
            if (p.is_file() and p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}


def test_every_package_is_a_part() -> None:
    """A folder of modules without ``__init__.py`` is invisible to :func:`_parts` and to its layer (attacks/,
    canaries/ and defenders/ were, until issue 45): every folder under ``src/privaudit`` holding Python files is
    a package, and every part is named in ``_ALL``."""
    folders = {p.parent for p in SRC.rglob("*.py")} - {SRC}
    assert sorted(str(f.relative_to(SRC)) for f in folders if not (f / "__init__.py").is_file()) == []
    assert _parts() <= _ALL, sorted(_parts() - _ALL)


def test_about_25_top_level_parts_on_at_most_8_layers() -> None:
    parts = _parts()
    assert {"verdict", "repro", "testing", "audits", "report", "claims", "attacks", "canaries", "defenders"} <= parts
    assert len(parts) <= MAX_PARTS, f"{len(parts)} top-level parts: {sorted(parts)}"
    edges = [e for e in module_edges() if e[0] in parts and e[1] in parts]
    assert layers(edges, parts) <= MAX_LAYERS


def test_no_forbidden_arrow() -> None:
    """E.g. the audits and the report read typed plans (``audits.runner.AuditPlan``, ``report.stage.ReportPlan``)
    built by their stages, never ``privaudit.config``."""
    assert violations(module_edges(), FORBIDDEN) == []


#: the library files that may run a GX suite: the one reader (or writer) of each artifact folder, which validates
#: what it reads or writes there; audits, the gate's math and the statistics get validated objects from them
VALIDATING_FILES = {
    "canaries/assembly.py",       # writes data/canaries/<defender>/ (checked before it is written)
    "canaries/stats_files.py",    # reads data/canaries/<defender>/
    "defenders/info_file.py",     # reads data/defenders/<name>/info.json; checks the model files (no pickle)
    "defenders/trained_files.py", # reads/writes data/defenders/<name>/ (model files: no pickle)
    "defenders/sklearn_zoo.py",   # the model-file contract's trusted types, for skops
    "defenders/user.py",          # the same, plus a user's trusted_types
    "verdict/metrics_files.py",   # reads metrics/*.json
    "report/stage.py",            # writes metrics/gate.json and metrics/summary.json
}


def validating_files(edges: Mapping[tuple[str, str], Iterable[tuple[str, str]]]) -> set[str]:
    """The files outside ``validation`` that import it."""
    return {a for (src, dst), files in edges.items() if dst == "validation" and src != "validation" for a, _ in files}


def test_only_the_artifact_readers_and_writers_run_the_suites() -> None:
    """Issue 36: the suites are no dependency of the library proper; one reader per artifact folder validates on
    read (``canaries.stats_files``, ``verdict.metrics_files``, ``defenders.trained_files``) and the writers check
    before they write."""
    assert validating_files(module_edges()) <= VALIDATING_FILES


def test_the_library_imports_no_tests_and_no_benchmarks() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        names = imports(path, "privaudit", by_name=False)
        found += [f"{path.relative_to(SRC)}: {n}" for n in names if n.split(".")[0] in {"tests", "benchmarks"}]
    assert found == []


def test_the_checks_find_planted_faults() -> None:
    planted = {("verdict", "report"): {("verdict/gate.py", "report/render.py")},
               ("audits", "config"): {("audits/runner.py", "config.py"), ("audits/lidp.py", "config.py")},
               ("defenders", "testing"): {("defenders/user.py", "testing/planted/digits.py")}}
    forbidden = {"verdict": {"report"}, "audits": {"config"}, "defenders": {"testing"}}
    assert violations(planted, forbidden) == [
        "audits/lidp.py -> config.py", "audits/runner.py -> config.py", "defenders/user.py -> testing/planted/digits.py",
        "verdict/gate.py -> report/render.py"]
    assert layers([("a", "b"), ("b", "c"), ("a", "c")], "abcd") == 3
    planted_validation = {("audits", "validation"): {("audits/game3.py", "validation/canary_suite.py")},
                          ("canaries", "validation"): {("canaries/stats_files.py", "validation/canary_suite.py")}}
    assert validating_files(planted_validation) - VALIDATING_FILES == {"audits/game3.py"}
