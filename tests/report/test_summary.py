"""``metrics/summary.json``: the review-sized metrics file that ``dvc metrics diff`` shows (issue 28)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privaudit.artifacts import write_json
from privaudit.verdict.metrics_files import (
    AuditMetrics,
    MetricsSummary,
    parse_entry,
    parse_gate,
    read_gate,
    read_metrics,
    read_summary,
)
from privaudit.report.summary import best_epsilon_by_threat_model, build_summary, threat_model_key
from privaudit.validation.metrics_suite import flatten

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "metrics"
MAX_ROWS_PER_DEFENDER = 15
MAX_LINE = 120


def committed() -> tuple[AuditMetrics, MetricsSummary]:
    metrics = read_metrics(METRICS / "ltu.json", METRICS / "audit.json", METRICS / "bounds.json")
    return metrics, build_summary(metrics, read_gate(METRICS / "gate.json"))


def test_summary_of_the_default_audit() -> None:
    _, summary = committed()
    dp = summary.defenders["dpsgd_eps1"]
    audit = json.loads((METRICS / "audit.json").read_text())["dpsgd_eps1"]
    assert summary.passed is True and dp.passed is True and dp.reasons == 0
    assert (dp.claimed_epsilon, dp.claimed_delta) == (audit["claimed_epsilon"], audit["claimed_delta"])
    # white-box: the white-box audit; black-box: the largest of one-run, many-run (GDP view), LiDP K = √n and
    # Game 3 (the assumption-free many-run bound is a diagnostic view, not a main bound)
    assert dp.eps_hat["white_box"] == audit["whitebox"]["eps_lower_bound"] and dp.eps_hat_bound["white_box"] == "whitebox"
    blackbox = max(audit["one_run"]["eps_lower_bound"], audit["blackbox"]["eps_lower_bound"],
                   audit["lidp"]["eps_lower_bound"], audit["game3"]["eps_low"])
    assert dp.eps_hat["black_box"] == blackbox
    mlp = summary.defenders["mlp"]
    assert mlp.claimed_epsilon is None and set(mlp.eps_hat) == {"black_box"}  # no claim, not observable
    ltu = json.loads((METRICS / "ltu.json").read_text())["mlp"]
    assert mlp.ltu is not None and (mlp.ltu.attacker, mlp.ltu.privacy, mlp.ltu.utility) == (
        ltu["attacker"], ltu["privacy"], ltu["utility"])


def test_committed_summary_is_the_one_built_from_the_committed_metrics() -> None:
    _, summary = committed()
    assert read_summary(METRICS / "summary.json") == summary


def test_review_sized() -> None:
    """At most 15 leaves per defender (the table rows are measured by test_dvc_metrics_diff_fits_one_screen)."""
    _, summary = committed()
    leaves = flatten(summary.to_json())
    for name in summary.defenders:
        rows = [k for k in leaves if k.startswith(f"defenders.{name}.")]
        assert 5 <= len(rows) <= MAX_ROWS_PER_DEFENDER, rows
    assert set(leaves) - {k for k in leaves if k.startswith("defenders.")} == {"passed"}


def test_largest_bound_per_threat_model_and_main_bounds_only() -> None:
    metrics, _ = committed()
    raw = json.loads((METRICS / "audit.json").read_text())["mlp"]
    raw["lidp"]["eps_lower_bound_k1"] = 99.0  # a diagnostic view, never the summary's ε̂
    raw["blackbox"]["eps_lower_bound_rate"] = 98.0  # the assumption-free many-run view: diagnostic too
    raw["lidp"]["eps_lower_bound"] = 50.0
    raw["one_run"]["threat_model"] = "white-box: a hypothetical one-run audit with gradient access"
    entry = parse_entry(type(metrics.audit["mlp"]), raw, "audit.mlp")
    best, source = best_epsilon_by_threat_model(entry)
    assert best == {"white_box": raw["one_run"]["eps_lower_bound"], "black_box": 50.0}
    assert source == {"white_box": "one_run", "black_box": "lidp"}
    assert threat_model_key("lidp", None) == "black_box" and threat_model_key("other", None) == "unspecified"


def test_failing_defender_and_missing_inputs() -> None:
    metrics, _ = committed()
    gate = parse_gate({"passed": False, "reasons": ["a", "b"],
                       "defenders": {"mlp": {"passed": False, "reasons": ["a", "b"]},
                                     "ghost": {"passed": False, "reasons": ["no metrics"]}}})
    summary = build_summary(metrics, gate)
    assert list(summary.defenders) == ["mlp", "ghost"] and summary.passed is False
    assert summary.defenders["mlp"].reasons == 2
    ghost = summary.defenders["ghost"]
    assert ghost.eps_hat == {} and ghost.ltu is None and summary.to_json()["defenders"]["ghost"] == {
        "eps_hat": {}, "eps_hat_bound": {}, "passed": False, "reasons": 1}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["defenders"]["mlp"].update(passed="yes"), "defenders.mlp.passed"),
        (lambda d: d["defenders"]["mlp"]["ltu"].update(privacy=1.5), "defenders.mlp.ltu.privacy"),
        (lambda d: d["defenders"]["mlp"]["eps_hat"].update(black_box=-1.0), "defenders.mlp.eps_hat.black_box"),
        (lambda d: d["defenders"]["mlp"].update(extra=1), "defenders.mlp.extra"),
    ],
)
def test_summary_file_is_validated(tmp_path: Path, change, message: str) -> None:
    data = json.loads((METRICS / "summary.json").read_text())
    change(data)
    write_json(tmp_path / "summary.json", data)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        read_summary(tmp_path / "summary.json")


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(cwd),
                               "DVC_NO_ANALYTICS": "1", "DO_NOT_TRACK": "1", "GIT_AUTHOR_NAME": "t",
                               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _bump(value):
    """Every number of a metrics object changed (a flag flipped): the most rows a diff can have."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 1.01 + 0.001
    if isinstance(value, dict):
        return {k: _bump(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bump(v) for v in value]
    return value


def test_dvc_metrics_diff_fits_one_screen(tmp_path: Path) -> None:
    """The repository's dvc.yaml: `dvc metrics diff` shows only the summary, ≤ 15 rows per defender,
    lines ≤ 120 characters, even when every number of every metrics file changed; the detail files
    stay reachable with --targets."""
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    shutil.copytree(METRICS, tmp_path / "metrics")
    _run(["git", "init", "-q"], tmp_path)
    _run([sys.executable, "-m", "dvc", "init", "-q"], tmp_path)
    _run(["git", "add", "-A"], tmp_path)
    _run(["git", "commit", "-qm", "audit"], tmp_path)
    for path in (tmp_path / "metrics").glob("*.json"):
        path.write_text(json.dumps(_bump(json.loads(path.read_text())), indent=2))
    out = _run([sys.executable, "-m", "dvc", "metrics", "diff", "--all"], tmp_path).splitlines()
    defenders = json.loads((METRICS / "summary.json").read_text())["defenders"]
    assert len(out) <= 1 + 1 + MAX_ROWS_PER_DEFENDER * len(defenders), "\n".join(out)
    assert max(map(len, out)) <= MAX_LINE, "\n".join(out)
    assert {line.split()[0] for line in out[1:]} == {"metrics/summary.json"}
    assert any("eps_hat.white_box" in line for line in out)
    detail = _run([sys.executable, "-m", "dvc", "metrics", "diff", "--targets", "metrics/audit.json"], tmp_path)
    assert "dpsgd_eps1.whitebox.eps_lower_bound" in detail


def test_label_dp_and_small_delta_are_readable() -> None:
    """Issue 34: a label-DP defender's add/remove black-box ε̂ says which neighbourhood it certifies, and a
    δ of 1e-5 keeps a leaf that `dvc metrics diff --precision 3` does not round to 0.0."""
    metrics, _ = committed()
    raw = json.loads((METRICS / "audit.json").read_text())["dpsgd_eps1"]
    raw.update(claimed_epsilon=2.0, claimed_delta=1e-5, claimed_neighbourhood="replace_label", claimed_mechanism=None)
    entry = parse_entry(type(metrics.audit["dpsgd_eps1"]), raw, "audit.alibi")
    gate = parse_gate({"passed": True, "reasons": [], "defenders": {"alibi": {"passed": True, "reasons": []}}})
    m = type(metrics)(ltu={}, audit={"alibi": entry}, bounds={})
    out = build_summary(m, gate).to_json()["defenders"]["alibi"]
    assert out["claimed_neighbourhood"] == "replace_label" and out["claimed_delta_log10"] == -5.0
    assert out["eps_hat_neighbourhood"]["black_box"] == "add_remove"
    assert round(out["claimed_delta_log10"], 3) == -5.0  # survives --precision 3
