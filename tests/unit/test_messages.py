"""Issue 28: error messages name the key, the bad value and the fix, in one line of bounded length.

Each case is one of the issue's reports: ``claimed_epsilon: -1`` caught only by the defenders stage
with the whole defenders list dumped; a several-KB stale-verdict message; a missing
``dataset.path`` without a fix; an 11,000-character message for a ';'-separated CSV.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privaudit import cli
from privaudit.config import ParamsError, parse_params
from privaudit.data.sources import load_source
from privaudit.messages import MAX_MESSAGE_CHARS, cap
from privaudit.verdict.metrics_files import GateResult
from stages import user_code as user_code_stage
from stages._runner import run_stage

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
USER = {"name": "mine", "kind": "python", "target": "examples/user_trainer.py:train",
        "loader": "examples/user_trainer.py:load"}


def _bad(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(RAW)
    node: Any = raw
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return raw


def test_cap_truncates_with_the_count_of_what_it_cut() -> None:
    assert cap("x" * 10, 10) == "x" * 10
    assert cap("x" * 25, 10) == "x" * 10 + "… (15 more characters)"
    assert len(cap("y" * 100_000)) < MAX_MESSAGE_CHARS + 40
    with pytest.raises(ValueError, match="limit=0"):
        cap("abc", 0)


PARAMS_CASES = [
    # (raw params, key the message names, bad value shown, fix named)
    pytest.param(_bad("defenders.2.epsilon", -1), "defenders[2].epsilon", "(got -1)", "should be greater than 0",
                 id="dp-epsilon"),
    pytest.param({**RAW, "defenders": [*RAW["defenders"], {**USER, "claimed_epsilon": -1}]},
                 "defenders[3].claimed_epsilon", "(got -1)", "should be greater than 0", id="claimed-epsilon"),
    pytest.param(_bad("dataset.name", "csv"), "dataset.path", "(got None)", "set it to your CSV file",
                 id="missing-path"),
    pytest.param({**_bad("dataset.name", "csv"), "dataset": {**RAW["dataset"], "name": "csv", "path": "t.csv"}},
                 "dataset.label_column", "(got None)", "set it to the name of the CSV column", id="missing-label"),
    pytest.param(_bad("lidp.trials", 1), "lidp.trials", "(got 1)", "greater than or equal to 2", id="range"),
    pytest.param(_bad("ltu.roundz", 3), "ltu.roundz", "unknown key", "check the spelling", id="unknown-key"),
    pytest.param(_bad("ltu.attackers", ["z" * 5000]), "ltu.attackers", "unknown attacker 'zzz", "allowed:",
                 id="long-value"),
]


@pytest.mark.parametrize("raw, key, value, fix", PARAMS_CASES)
def test_params_errors_name_key_value_and_fix_in_one_short_line(raw: dict[str, Any], key: str, value: str, fix: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    with pytest.raises(ParamsError) as err:
        parse_params(raw)
    message = str(err.value)
    assert message.startswith("invalid params: ") and "\n" not in message
    assert key in message and value in message and fix in message, message
    assert len(message) <= MAX_MESSAGE_CHARS + 40
    assert "'kind': 'logistic_regression'" not in message  # never the whole defenders list again


def test_several_params_errors_are_counted_on_one_line() -> None:
    raw = _bad("lidp.trials", 1)
    raw["ltu"]["roundz"] = 3
    message = str(pytest.raises(ParamsError, parse_params, raw).value)
    assert message.startswith("invalid params (2 problems): ") and "\n" not in message
    assert "ltu.roundz: unknown key" in message and "lidp.trials: Input should be" in message


def test_user_code_stage_the_first_stage_refuses_bad_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``claimed_epsilon: -1`` stops the pipeline at its first stage (before: only when `defenders` ran)."""
    monkeypatch.chdir(ROOT)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({**RAW, "defenders": [*RAW["defenders"], {**USER, "claimed_epsilon": -1}]}))
    out = tmp_path / "user_code.json"
    assert user_code_stage.main(["--params", str(params), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("stage user_code failed: invalid params: defenders[3].claimed_epsilon") and "(got -1)" in err
    assert "\n" not in err and not out.exists()
    params.write_text(yaml.safe_dump({**RAW, "defenders": [*RAW["defenders"], USER]}))  # the same file, fixed
    assert user_code_stage.main(["--params", str(params), "--out", str(out)]) == 0 and out.is_file()


def test_stage_messages_are_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(RAW))

    def body(args: Any, p: Any) -> None:
        raise ValueError("q" * 20_000 + " THE END")

    assert run_stage("demo", lambda parser: None, body, ["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("stage demo failed: qqq") and err.endswith("more characters)")
    assert len(err) <= MAX_MESSAGE_CHARS + 60


def _table(path: Path, sep: str, n_features: int = 400) -> Path:
    rng = np.random.default_rng(0)
    header = [f"feature_{i}" for i in range(n_features)] + ["diagnosis"]
    rows = [sep.join([*(f"{v:.4f}" for v in rng.random(n_features)), str(r % 2)]) for r in range(12)]
    path.write_text("\n".join([sep.join(header), *rows]) + "\n")
    return path


@pytest.mark.parametrize("sep, shown, fix", [
    (";", "looks ';'-separated", "pandas.read_csv(path, sep=';').to_csv(new_path, index=False)"),
    ("|", "looks '|'-separated", "pandas.read_csv(path, sep='|')"),
    ("\t", "looks tab-separated", "name it *.tsv"),
])
def test_csv_with_another_separator_says_so(tmp_path: Path, sep: str, shown: str, fix: str) -> None:
    """The 400-feature header used to come back whole as a 'column' list (11,000 characters)."""
    path = _table(tmp_path / "table.csv", sep)
    with pytest.raises(ValueError) as err:
        load_source("csv", str(path), "diagnosis")
    message = str(err.value)
    assert shown in message and fix in message and "dataset.path=" in message
    assert "privaudit reads comma-separated files" in message
    assert len(message) < 600 and "\n" not in message


def test_tab_separated_file_named_tsv_still_loads(tmp_path: Path) -> None:
    data = load_source("csv", str(_table(tmp_path / "table.tsv", "\t", n_features=5)), "diagnosis")
    assert data.X.shape == (12, 5)


def test_missing_label_column_lists_columns_briefly(tmp_path: Path) -> None:
    path = _table(tmp_path / "table.csv", ",")
    with pytest.raises(ValueError) as err:
        load_source("csv", str(path), "label")
    message = str(err.value)
    assert "dataset.label_column='label'" in message and "set it to the label column's name" in message
    assert "more characters)" in message and len(message) < 600


def test_stale_verdict_message_is_capped_and_keeps_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A gate stale in many long ways: the message is capped before the hint, so the fix is always shown."""
    import privaudit.repro.provenance as provenance

    problems = [f"input data/features/part-{i}.npz changed: " + "ab" * 2000 for i in range(40)]
    monkeypatch.setattr(provenance, "provenance_drift", lambda recorded, repo: problems)
    gate = GateResult(passed=True, reasons=(), defenders={}, provenance={"version": 1})
    message = cli.check_fresh(gate, tmp_path / "gate.json", tmp_path)
    assert message is not None and message.endswith(cli.STALE_HINT)
    assert "is stale: input data/features/part-0.npz changed" in message and "more characters)" in message
    assert len(message) <= MAX_MESSAGE_CHARS + len(cli.STALE_HINT) + 40
