"""Issue 25: the audits are one family — one registry, one protocol, one error budget — and the layers point one way.

Read from the AST (``tests/import_graph.py``, function-local imports included), so the rules hold for
lazy imports too:

- every registered audit is a module ``privaudit.audits.<name>`` with ``CITATION`` and
  ``run(request, inputs, settings)``; the registry lists the same bounds as ``gate.bounds`` accepts;
- the stages, the gate and the merge of ``metrics/audit.json`` never name an audit;
- ``stats`` imports nothing from privaudit; the white-box estimator imports no opacus (accounting has
  its own module); ``audits`` depend on ``stats``, never the reverse;
- ``attacks`` and ``canaries`` import no ``config``; ``benchmarks`` import nothing from ``tests``;
- ``gate.beta`` is the only β a user sets (``lidp.beta`` is refused, naming the fix).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from privaudit.audits.runner import AuditPlan, run_audit
from privaudit.config import parse_params
from privaudit.claims.registry import AUDITS, BOUND_KINDS, block_audits
from tests.import_graph import ROOT, imports

SRC = ROOT / "src" / "privaudit"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / "src").with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports_of(folder: Path) -> dict[str, set[str]]:
    return {p.relative_to(ROOT).as_posix(): imports(p, _module_name(p) if p.is_relative_to(SRC) else p.stem,
                                                     by_name=False)
            for p in sorted(folder.rglob("*.py"))}


@pytest.mark.parametrize("line", AUDITS, ids=[a.name for a in AUDITS])
def test_every_registered_audit_is_one_module_with_the_protocol(line) -> None:
    module = importlib.import_module(line.module)
    assert isinstance(getattr(module, "CITATION", None), str) and re.search(r"\d{4}", module.CITATION), (
        f"{line.module} must cite its paper (and year) in CITATION")
    if line.in_audit_json:
        run = getattr(module, "run", None)
        assert callable(run), f"{line.module} has no run(request, inputs, settings)"
        assert list(inspect.signature(run).parameters) == ["request", "inputs", "settings"]
        # each audit registers its own settings type: a frozen dataclass of the params it reads, built once by
        # AuditPlan.of from the block its line names (every field must be a key of that block)
        settings_type = getattr(module, "SETTINGS", None)
        assert dataclasses.is_dataclass(settings_type) and settings_type.__dataclass_params__.frozen, (
            f"{line.module} must name its settings type SETTINGS (a frozen dataclass)")
        plan = AuditPlan.of(line.name, parse_params({"defenders": [{"name": "x", "kind": "logistic_regression"}]}))
        assert type(plan.settings) is settings_type
        assert inspect.signature(run).parameters["settings"].annotation in (settings_type, settings_type.__name__)


def test_an_audit_run_refuses_settings_that_are_not_its_own_type(tmp_path) -> None:
    """A raw params block (or another audit's settings) handed to run_audit is refused before any work."""
    from privaudit.audits.protocol import AuditInputs

    params = parse_params({"defenders": [{"name": "x", "kind": "logistic_regression"}]})
    plan = dataclasses.replace(AuditPlan.of("game3", params), settings=params.game3)
    with pytest.raises(TypeError, match="Game3Settings.*AuditPlan.of"):
        run_audit(plan, AuditInputs(canaries_dir=tmp_path), defenders_dir=tmp_path)


def test_the_registry_is_the_list_of_bounds_and_blocks() -> None:
    from privaudit.claims.error_budget import DEFAULT_GATED
    from privaudit.verdict.metrics_files import AuditEntry

    assert BOUND_KINDS == ("whitebox", "one_run", "blackbox", "blackbox_rate", "lidp", "lidp_k1", "game3", "theory")
    assert set(DEFAULT_GATED) <= set(BOUND_KINDS)
    # every registered block is read from metrics/audit.json, in registry order
    entry = AuditEntry.model_validate({a.name: {"eps_lower_bound": 1.0, "eps_lower_bound_k1": 0.5, "eps_low": 0.2,
                                                "eps_lower_bound_rate": 0.7}
                                       for a in block_audits()})
    assert [kind for kind, *_ in entry.epsilon_lower_bounds()] == [
        b.kind for a in block_audits() for b in a.bounds if b.epsilon_key is not None]


def test_a_new_audit_is_one_registry_line_away_from_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of a newly registered audit is read from metrics/audit.json and compared by the gate."""
    from privaudit.claims import registry as audit_registry
    from privaudit.claims.registry import AuditLine, BoundLine
    from privaudit.verdict.claim_check import audited_bounds, check_bounds
    from privaudit.claims.claim import PrivacyClaim
    from privaudit.verdict.metrics_files import AuditEntry

    new = AuditLine("blackbox_new", "privaudit.audits.blackbox_new",
                    (BoundLine("blackbox_new", "eps_lower_bound", "a new black-box audit"),), "always", "trainer",
                    "one_run")
    monkeypatch.setattr(audit_registry, "AUDITS", AUDITS + (new,))
    entry = AuditEntry.model_validate({"blackbox_new": {"eps_lower_bound": 3.0, "delta": 1e-5,
                                                        "neighbourhood": "add_remove", "level": 0.01}})
    bounds = audited_bounds(entry)
    assert [b.kind for b in bounds] == ["blackbox_new"]
    (finding,) = check_bounds(PrivacyClaim(1.0, 1e-5, "add_remove"), bounds)
    assert finding.violation and "blackbox_new.eps_lower_bound" in (finding.reason or "")
    with pytest.raises(ValueError, match="not_registered"):
        AuditEntry.model_validate({"not_registered": {"eps_lower_bound": 3.0}})


_AUDIT_NAMES = re.compile(r"""["'](whitebox|one_run|lidp|lidp_k1|game3)["']""")


@pytest.mark.parametrize("path", ["stages/_audit.py", "stages/audit.py", "src/privaudit/audits/runner.py",
                                  "src/privaudit/verdict/entry.py", "src/privaudit/verdict/gate.py",
                                  "src/privaudit/claims/error_budget.py", "src/privaudit/verdict/claim_check.py"])
def test_the_stages_the_merge_and_the_gate_never_name_an_audit(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    named = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and _AUDIT_NAMES.fullmatch(repr(n.value))]
    assert not named, f"{path} special-cases audit(s) {named}; loop over privaudit.claims.registry.AUDITS instead"


def test_audit_stages_are_the_generic_stage() -> None:
    for line in block_audits():
        text = (ROOT / "stages" / f"{line.name}.py").read_text()
        assert f'audit_stage("{line.name}"' in text, f"stages/{line.name}.py must run stages._audit.audit_stage"


def test_stats_import_nothing_from_privaudit_and_the_estimator_no_opacus() -> None:
    for path, found in _imports_of(SRC / "stats").items():
        assert not {m for m in found if m.startswith("privaudit") and not m.startswith("privaudit.stats")}, path
        if not path.endswith("stats/accounting.py"):
            assert not {m for m in found if m.split(".")[0] == "opacus"}, (
                f"{path} imports opacus; accounting lives in privaudit.stats.accounting")


def test_audits_depend_on_stats_never_the_reverse() -> None:
    for path, found in _imports_of(SRC / "stats").items():
        assert not {m for m in found if m.startswith("privaudit.audits")}, path
    audits = _imports_of(SRC / "audits")
    assert any(m.startswith("privaudit.stats") for found in audits.values() for m in found)


@pytest.mark.parametrize("package", ["attacks", "canaries", "stats", "audits"])
def test_no_forbidden_config_imports(package: str) -> None:
    """attacks, canaries and stats import no config (the stage glue hands typed params in); audits
    read their settings as handed in, except the runner (the per-defender loop over Params)."""
    allowed = {"src/privaudit/audits/runner.py"}
    bad = {p: sorted(m for m in found if m == "privaudit.config" or m.startswith("privaudit.config."))
           for p, found in _imports_of(SRC / package).items() if p not in allowed}
    assert not {p: m for p, m in bad.items() if m}, f"{package} imports config: {bad}"


def test_benchmarks_import_nothing_from_tests() -> None:
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        found = imports(path, "benchmarks." + path.stem, by_name=False)
        assert not {m for m in found if m == "tests" or m.startswith("tests.")}, path.relative_to(ROOT)


def test_the_hook_keeps_its_public_path() -> None:
    from privaudit.hooks import recording, watch

    assert callable(watch) and callable(recording)


def test_gate_beta_is_the_only_beta() -> None:
    from privaudit.config import parse_params

    with pytest.raises(ValueError, match=r"lidp\.beta was removed: set gate\.beta"):
        parse_params({"defenders": [{"name": "l", "kind": "logistic_regression"}], "lidp": {"beta": 0.05}})
    assert "beta" not in (ROOT / "params.yaml").read_text().split("\ngate:")[0]
