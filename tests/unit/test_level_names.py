"""One name for one quantity (issue 36): the error-budget share is ``level``, keyword-only, with no default.

``level`` is the failure probability of each one-sided bound a function returns (an interval it returns is
a 1 - 2·level interval; a bound built from pieces — Bonferroni, XBern ends — has total failure probability
``level``). Below the stages nobody picks a level silently: every public function and method of the
library that takes one takes it as ``*, level`` without a default, and no public function takes the old
names ``beta``/``alpha`` for it. The allow-list holds the names that mean something else, each with why.
Read from the AST, so the check imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "privaudit"

#: (file, function, parameter) that keep an old name, and why
ALLOWED: dict[tuple[str, str, str], str] = {
    ("claims/error_budget.py", "plan_budget", "beta"): "the TOTAL budget, params key gate.beta, split into levels",
    ("testing/gate_simulation.py", "simulate_gate", "beta"): "the TOTAL gate.beta the simulated gate plans from",
    ("canaries/designs.py", "draw_clipbkd", "alpha"): "ClipBKD's canary scale (LiDP App. D.1 eq. 23)",
    ("canaries/batched_runs.py", "clipbkd_labels", "alpha"): "ClipBKD's canary scale",
}
#: files whose ``alpha`` is a false-positive rate (the x-axis of a trade-off curve f(alpha)), not a level
FPR_FILES = {"stats/tradeoff.py"}


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of module-level classes whose names do not start with ``_``."""
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            out.append(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out += [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not m.name.startswith("_")]
    return out


def level_violations(source: str, rel: str) -> list[str]:
    """Every public parameter of ``source`` (file ``rel`` under ``src/privaudit``) that breaks the rule."""
    found = []
    for fn in _public_functions(ast.parse(source)):
        a = fn.args
        kw_defaults = dict(zip((x.arg for x in a.kwonlyargs), a.kw_defaults))
        for arg in a.posonlyargs + a.args:
            if arg.arg == "level":
                found.append(f"{rel}:{fn.lineno} {fn.name}: level must be keyword-only (write `*, level`)")
        for name, default in kw_defaults.items():
            if name == "level" and default is not None:
                found.append(f"{rel}:{fn.lineno} {fn.name}: level must have no default (the caller's budget share)")
        for arg in a.posonlyargs + a.args + a.kwonlyargs:
            if arg.arg in {"beta", "alpha"} and (rel, fn.name, arg.arg) not in ALLOWED and not (
                    arg.arg == "alpha" and rel in FPR_FILES):
                found.append(f"{rel}:{fn.lineno} {fn.name}: parameter {arg.arg!r} — call the bound's failure "
                             "probability `level` (keyword-only, no default)")
    return found


def test_every_public_function_takes_level_keyword_only_without_default() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        found += level_violations(path.read_text(), path.relative_to(SRC).as_posix())
    assert found == [], "\n".join(found)


def test_the_allow_list_names_only_existing_parameters() -> None:
    """An allow-list entry whose function or parameter is gone would let a new one through unseen."""
    for (rel, fn_name, param), why in ALLOWED.items():
        tree = ast.parse((SRC / rel).read_text())
        fns = [f for f in _public_functions(tree) if f.name == fn_name]
        assert fns, f"{rel}: no public function {fn_name} ({why})"
        a = fns[0].args
        assert param in {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}, f"{rel}:{fn_name} has no {param}"


def test_the_check_finds_planted_faults() -> None:
    planted = '''
def bound(k, n, level=0.05): ...
def interval(k, n, alpha): ...
def share(x, *, level=0.05): ...
def fine(x, *, level): ...
def _private(x, beta=0.05): ...
class Audit:
    def run(self, x, beta): ...
    def ok(self, x, *, level): ...
'''
    found = level_violations(planted, "stats/planted.py")
    assert [f.split(" ")[1].rstrip(":") for f in found] == ["bound", "interval", "share", "run"]
    assert level_violations("def curve(theta, alpha): ...", "stats/tradeoff.py") == []
    assert level_violations("def draw_clipbkd(v, labels, alpha, count, rng): ...", "canaries/designs.py") == []
