"""The project's import graph, read from the AST (function-local imports included); for the tests
of dvc.yaml deps and of import cycles."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_MODULE_NAME = re.compile(r"^privaudit(\.[a-z_0-9]+)+$")


def module_file(name: str) -> Path | None:
    """The repository file of a project module name (privaudit.* under src/, stages.*), if any."""
    if name.startswith("privaudit"):
        base = ROOT / "src" / Path(*name.split("."))
    elif name.startswith("stages"):
        base = ROOT / Path(*name.split("."))
    else:
        return None
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports(path: Path, module: str, by_name: bool = True) -> set[str]:
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
        elif by_name and isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.match(node.value):
            found.add(node.value)  # imported by name: lazy __getattr__ maps, the registry's TRAINER_MODULES
    return found
