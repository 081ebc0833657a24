"""``privaudit.report.stage``: what the report stage does, on the committed default-audit metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from privaudit.config import load_params
from privaudit.report.stage import (
    ReportPaths,
    ReportPlan,
    read_epsilon_curves,
    read_ltu_tables,
    read_table1,
    run_report,
    select_table1,
)
from privaudit.validation import ValidationFailed

ROOT = Path(__file__).resolve().parents[2]


def paths_in(tmp_path: Path) -> ReportPaths:
    """The stage's paths with the committed metrics copied under ``tmp_path`` and outputs there too."""
    for name in ("ltu", "audit", "bounds"):
        shutil.copy(ROOT / "metrics" / f"{name}.json", tmp_path / f"{name}.json")
    return ReportPaths(ltu=tmp_path / "ltu.json", audit=tmp_path / "audit.json", bounds=tmp_path / "bounds.json",
                       ltu_scores=tmp_path / "ltu", curves=tmp_path / "curves", gate=tmp_path / "out" / "gate.json",
                       summary=tmp_path / "out" / "summary.json", out=tmp_path / "reports", repo=ROOT)


def test_run_report_reproduces_the_committed_verdict(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    gate = run_report(paths, ReportPlan.of(load_params(ROOT / "params.yaml")))
    committed = json.loads((ROOT / "metrics" / "gate.json").read_text())
    written = json.loads(paths.gate.read_text())
    assert gate.to_json() == {k: v for k, v in committed.items() if k != "provenance"}
    assert written == {**gate.to_json(), "provenance": written["provenance"]}
    assert written["provenance"]["stage"] == "report"
    # the review-sized metrics file: the committed one is what the stage writes from the committed metrics
    assert paths.summary.read_text() == (ROOT / "metrics" / "summary.json").read_text()
    assert {p.name for p in paths.out.iterdir()} == {"audit.html", "audit.md", "plots"}
    assert not [p for p in paths.out.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_a_broken_contract_writes_nothing(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    ltu = json.loads(paths.ltu.read_text())
    ltu["mlp"]["privacy"] = 1.5  # a score outside [0, 1]: the GX contract, not the type, rejects it
    paths.ltu.write_text(json.dumps(ltu))
    with pytest.raises(ValidationFailed):
        run_report(paths, ReportPlan.of(load_params(ROOT / "params.yaml")))
    assert not paths.gate.exists() and not paths.summary.exists() and not any(paths.out.iterdir())  # folders made early, nothing written


def test_optional_tables_are_read_where_present(tmp_path: Path) -> None:
    (tmp_path / "a.scores.parquet").write_bytes(b"")  # present but never read: "a" is not a defender here
    pd.DataFrame({"id": ["s1"], "role": ["defender"], "score": [0.5]}).to_parquet(tmp_path / "b.scores.parquet")
    (tmp_path / "b.roc.json").write_text("{}")  # empty: left out
    (tmp_path / "c.roc.json").write_text(json.dumps({"gap": {"fpr": [0, 1], "tpr": [0, 1]}}))
    scores, roc = read_ltu_tables(tmp_path, ["b", "c", "d"])
    assert list(scores) == ["b"] and list(scores["b"].columns) == ["id", "role", "score"]
    assert roc == {"c": {"gap": {"fpr": [0, 1], "tpr": [0, 1]}}}
    pd.DataFrame({"trials": [10], "eps_k1": [0.1], "eps_ksqrt": [0.2], "extra": [1]}).to_csv(tmp_path / "b.csv")
    curves = read_epsilon_curves(tmp_path, ["b", "c"])
    assert list(curves) == ["b"] and list(curves["b"].columns) == ["trials", "eps_k1", "eps_ksqrt"]


def test_table1_files_are_keyed_by_data_set(tmp_path: Path) -> None:
    pd.DataFrame({"model": ["knn"], "privacy": [0.1]}).to_csv(tmp_path / "table1_digits.csv", index=False)
    assert list(read_table1([str(tmp_path / "table1_digits.csv")])) == ["digits"]
    with pytest.raises(FileNotFoundError, match=r"report\.table1: .*nope\.csv not found .*set it to null"):
        read_table1([str(tmp_path / "nope.csv")])


def test_table1_of_another_data_set_is_left_out() -> None:
    tables = {"digits": pd.DataFrame({"a": [1]}), "location": pd.DataFrame({"a": [2]})}
    shown, left_out = select_table1(tables, "csv")
    assert shown == {} and left_out == ("digits", "location")
    shown, left_out = select_table1(tables, "location")
    assert list(shown) == ["location"] and left_out == ("digits",)
    shown, left_out = select_table1(tables, "csv", other_datasets=True)
    assert list(shown) == ["digits", "location"] and left_out == ()


def test_report_on_other_data_shows_no_benchmark_table_and_says_so(tmp_path: Path) -> None:
    """The shipped report.table1 lists the digits and Location tables: an audit of a user's own data
    set (here `csv`) shows neither, and says why and how to show them."""
    paths = paths_in(tmp_path)
    params = load_params(ROOT / "params.yaml")
    assert params.report.table1 and not params.report.table1_other_datasets
    own = params.model_copy(update={"dataset": params.dataset.model_copy(update={"name": "csv"})})
    run_report(paths, ReportPlan.of(own))
    md = (paths.out / "audit.md").read_text().replace("\\", "")  # Markdown escapes dropped
    section = md[md.index("LTU Table 1 reproduction"):]
    assert "Not shown: the reproduction(s) of digits, location listed in report.table1" in section
    assert "this audit's (csv)" in section and "report.table1_other_datasets: true" in section
    assert "unseeded privacy" not in md  # no Table 1 pivot rendered
    run_report(paths, ReportPlan.of(params))  # the default digits audit: its own table, Location's left out
    md = (paths.out / "audit.md").read_text().replace("\\", "")
    assert "unseeded privacy" in md and "Not shown: the reproduction(s) of location listed" in md
