"""No import cycles between project modules, function-local imports included (issue 16).

A function-local import that closes a cycle (``validation.core`` ↔ ``validation.docs`` was one)
hides a layering knot: the two modules can only be understood, tested and moved together. The
registry's self-registration (``TRAINER_MODULES`` names trainer modules as strings, imported with
``importlib``) is deliberately not an import edge here.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from tests.import_graph import ROOT, imports, module_file


def _graph() -> dict[Path, set[Path]]:
    graph: dict[Path, set[Path]] = {}
    for path in sorted((ROOT / "src" / "privaudit").rglob("*.py")):
        rel = path.relative_to(ROOT / "src").with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        module = ".".join(parts)
        targets = {module_file(name) for name in imports(path, module, by_name=False)}
        graph[path] = {t for t in targets if t is not None and t != path}
    return graph


def cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """Strongly connected components with more than one module, sorted."""
    g = nx.DiGraph()
    g.add_nodes_from(graph)
    g.add_edges_from((v, w) for v, ws in graph.items() for w in ws)
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def test_no_import_cycles_between_project_modules() -> None:
    found = [[p.relative_to(ROOT).as_posix() for p in comp] for comp in cycles(_graph())]
    assert not found, f"import cycles (function-local imports count): {found}"


def _package(path: Path) -> Path:
    """``privaudit/<sub>`` for a module in a sub-package, else the top-level module itself."""
    rel = path.relative_to(ROOT / "src" / "privaudit")
    return Path(rel.parts[0]) if len(rel.parts) > 1 else rel


def test_no_import_cycles_between_packages() -> None:
    """Layers point one way: e.g. ``defenders`` → ``validation`` → ``defenders`` (issue 16) is a cycle."""
    packages: dict[Path, set[Path]] = {}
    for src, targets in _graph().items():
        packages.setdefault(_package(src), set()).update(_package(t) for t in targets if _package(t) != _package(src))
    found = [[str(p) for p in comp] for comp in cycles(packages)]
    assert not found, f"import cycles between packages: {found}"


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    a, b, c, d = (Path(x) for x in "abcd")
    assert cycles({a: {b}, b: {c}, c: {a}, d: {a}}) == [[a, b, c]]
    assert cycles({a: {b}, b: {c}, d: {a}}) == []
