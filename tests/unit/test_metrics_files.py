"""The typed metrics files: the committed default-audit outputs read once, errors naming file and key."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from privaudit.artifacts import dumps_json
from privaudit.verdict.metrics_files import AuditMetrics, parse_entries, parse_gate, read_gate, read_metrics

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "metrics"


def read_committed() -> AuditMetrics:
    return read_metrics(METRICS / "ltu.json", METRICS / "audit.json", METRICS / "bounds.json")


def test_committed_metrics_are_typed() -> None:
    m = read_committed()
    assert m.defenders() == ["dpsgd_eps1", "logreg", "mlp"]
    raw_ltu = json.loads((METRICS / "ltu.json").read_text())
    mlp = m.ltu["mlp"]
    assert mlp.privacy == raw_ltu["mlp"]["privacy"] and mlp.attacker == raw_ltu["mlp"]["attacker"]
    assert set(mlp.attackers) == set(raw_ltu["mlp"]["attackers"])
    assert mlp.model_extra is not None and mlp.model_extra["sample_risk"] == raw_ltu["mlp"]["sample_risk"]  # open
    dp = m.audit["dpsgd_eps1"]
    assert dp.claim is not None and dp.claim.neighbourhood == "add_remove"
    assert dp.budget is not None and "theory" in dp.budget.gated
    assert isinstance(dp.lidp.trials, int) and not isinstance(dp.lidp.trials, bool)  # JSON ints stay ints
    kinds = [kind for kind, *_ in dp.epsilon_lower_bounds()]
    assert kinds == ["whitebox", "one_run", "blackbox", "blackbox_rate", "lidp", "lidp_k1", "game3"]
    assert dp.blackbox is not None and dp.blackbox.ceiling is not None and dp.blackbox.ceiling.eps > 0
    assert m.audit["logreg"].claim is None and m.audit["logreg"].whitebox is None
    assert set(m.bounds["dpsgd_eps1"].accuracy_bounds()) == {"thudi", "yeom", "erlingsson", "sablayrolles", "izzo"}
    assert m.bounds["logreg"].accuracy_bounds() == {}


def test_committed_gate_round_trips_byte_for_byte() -> None:
    gate = read_gate(METRICS / "gate.json")
    assert gate.provenance is not None
    assert dumps_json(gate.to_json()) == (METRICS / "gate.json").read_text()


@pytest.mark.parametrize(
    ("kind", "mutate", "where"),
    [
        ("ltu", lambda d: d["mlp"].update(privacy="0.9"), "ltu.mlp.privacy"),
        ("ltu", lambda d: d["mlp"]["attackers"]["lira"].update(rounds=True), "ltu.mlp.attackers.lira.rounds"),
        ("audit", lambda d: d["mlp"]["lidp"].update(eps_lower_bound=[1]), "audit.mlp.lidp.eps_lower_bound"),
        ("audit", lambda d: d["mlp"].update(claimed_neighbourhood="nope"), "audit.mlp.claimed_neighbourhood"),
        ("audit", lambda d: d["mlp"].update(typo_key=1), "audit.mlp.typo_key"),  # entries are closed
        ("audit", lambda d: d["mlp"]["budget"].update(gated="lidp"), "audit.mlp.budget.gated"),
        ("bounds", lambda d: d["mlp"].update(thudi="0.7"), "bounds.mlp.thudi"),
    ],
)
def test_a_wrong_type_names_the_file_and_the_key(
    tmp_path: Path, kind: str, mutate: Callable[[dict[str, Any]], None], where: str
) -> None:
    for name in ("ltu", "audit", "bounds"):
        shutil.copy(METRICS / f"{name}.json", tmp_path / f"{name}.json")
    data = json.loads((tmp_path / f"{kind}.json").read_text())
    mutate(data)
    (tmp_path / f"{kind}.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / kind}.json: {where}: ")):
        read_metrics(tmp_path / "ltu.json", tmp_path / "audit.json", tmp_path / "bounds.json")


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="ltu.json not found"):
        read_metrics(tmp_path / "ltu.json", tmp_path / "audit.json", tmp_path / "bounds.json")
    empty = read_metrics(tmp_path / "ltu.json", tmp_path / "audit.json", tmp_path / "bounds.json", missing_ok=True)
    assert empty == AuditMetrics() and empty.defenders() == []
    with pytest.raises(ValueError, match="does not exist; run the report stage first"):
        read_gate(tmp_path / "gate.json")


def test_null_means_absent_and_absent_blocks_are_none() -> None:
    entry = parse_entries("audit", {"d": {"claimed_epsilon": None, "game3": None}})["d"]
    assert entry.claim is None and entry.game3 is None and entry.epsilon_lower_bounds() == []
    ltu = parse_entries("ltu", {"d": {"accuracy": 0.6, "rounds": 100}})["d"]
    assert ltu.privacy is None and not ltu.has_top_level_result
    assert ltu.privacy_error() == pytest.approx(2 * (0.6 * 0.4 / 100) ** 0.5)  # Eq. 1 from accuracy and rounds


def test_strongest_attacker_and_per_attacker_order() -> None:
    ltu = parse_entries("ltu", {"d": {"privacy": 0.2, "attackers": {"x": {"privacy": 0.3}, "y": {"privacy": 0.1}}}})
    entry = ltu["d"]
    assert entry.strongest_attacker() == "y"  # no top-level name: the lowest privacy
    assert list(entry.per_attacker()) == ["y", "x"] and entry.per_attacker()["y"] is entry


def test_gate_shape_is_strict() -> None:
    with pytest.raises(ValueError, match=r"gate\.passed: Input should be a valid boolean"):
        parse_gate({"passed": "no", "reasons": [], "defenders": {}})
    with pytest.raises(ValueError, match=r"gate\.extra: Extra inputs are not permitted"):
        parse_gate({"passed": True, "reasons": [], "defenders": {}, "extra": 1})
    with pytest.raises(ValueError, match="gate must be an object"):
        parse_gate([])
