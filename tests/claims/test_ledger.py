"""The ledger of releases (``releases.yaml``, :mod:`privaudit.claims.ledger`): round trip, append, refusals."""

from __future__ import annotations

import shutil
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from privaudit.claims.ledger import (
    LEDGER_HEADER,
    Ledger,
    LedgerAudit,
    LedgerClaim,
    LedgerDataset,
    LedgerError,
    Release,
    append_release,
    dump_ledger,
    read_ledger,
)
from privaudit.claims.mechanisms import parse_mechanism

ROOT = Path(__file__).resolve().parents[2]
SG = {"kind": "subsampled_gaussian", "noise_multiplier": 4.65, "sample_rate": 0.0712, "steps": 280}


def release(name: str = "dpsgd-1", identity: str = "digits", epsilon: float = 1.0, mechanism: dict | None = None,
            neighbourhood: str = "add_remove") -> Release:
    return Release(
        name=name, defender="dpsgd_eps1", date=datetime(2026, 5, 4, 9, 12, 44, tzinfo=timezone.utc),
        dataset=LedgerDataset(identity=identity, digest="ab" * 32),
        claim=LedgerClaim(epsilon=epsilon, delta=1e-5, neighbourhood=neighbourhood,
                          mechanism=parse_mechanism(mechanism) if mechanism else None),
        audit=LedgerAudit(commit="0123456789abcdef0123456789abcdef01234567", gate_hash="cd" * 32))


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    """A copy of the repository's committed (empty) ledger."""
    path = tmp_path / "releases.yaml"
    shutil.copy(ROOT / "releases.yaml", path)
    return path


def test_the_committed_ledger_is_empty_with_its_header() -> None:
    text = (ROOT / "releases.yaml").read_text(encoding="utf-8")
    assert read_ledger(ROOT / "releases.yaml") == Ledger(version=1, releases=())
    assert text.startswith("# The ledger of releases") and text == dump_ledger(Ledger())  # header + empty body


def test_round_trip_keeps_every_field_and_the_header(ledger_file: Path) -> None:
    first, second = release(), release("dpsgd-2", mechanism=SG)
    append_release(ledger_file, first)
    new = append_release(ledger_file, second)
    back = read_ledger(ledger_file)
    assert back == new and back.releases == (first, second)
    assert back.releases[1].claim.mechanism is not None and back.releases[1].claim.mechanism.kind == "subsampled_gaussian"
    text = ledger_file.read_text(encoding="utf-8")
    assert text.startswith(LEDGER_HEADER)
    raw = yaml.safe_load(text)["releases"][0]
    assert raw["date"] == "2026-05-04T09:12:44Z" and raw["claim"]["mechanism"] is None  # ISO, UTC; the key is kept
    assert set(raw) == {"name", "defender", "date", "dataset", "claim", "audit"}


def test_a_custom_header_survives_appends(ledger_file: Path) -> None:
    ledger_file.write_text("# our team's ledger\nversion: 1\nreleases: []\n", encoding="utf-8")
    append_release(ledger_file, release())
    assert ledger_file.read_text(encoding="utf-8").startswith("# our team's ledger\nversion: 1\n")


def test_grouped_by_identity_not_by_digest(ledger_file: Path) -> None:
    append_release(ledger_file, release("a", identity="patients"))
    append_release(ledger_file, release("b", identity="digits"))
    append_release(ledger_file, release("c", identity="patients"))
    assert [r.name for r in read_ledger(ledger_file).for_identity("patients")] == ["a", "c"]


def test_a_taken_name_is_refused_and_the_file_kept(ledger_file: Path) -> None:
    append_release(ledger_file, release())
    before = ledger_file.read_bytes()
    with pytest.raises(LedgerError, match="already holds a release named 'dpsgd-1': pass another --name"):
        append_release(ledger_file, release())
    assert ledger_file.read_bytes() == before


def test_concurrent_appends_all_land(ledger_file: Path) -> None:
    threads = [threading.Thread(target=append_release, args=(ledger_file, release(f"r{i}"))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.name for r in read_ledger(ledger_file).releases) == [f"r{i}" for i in range(8)]


def test_missing_ledger_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"version: 1.*releases: \[\]"):
        read_ledger(tmp_path / "releases.yaml")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r["claim"].update(epsilon=float("inf")), r"releases\[0\]\.claim\.epsilon: .*finite epsilon"),
    (lambda r: r["claim"].update(delta=1.5), r"releases\[0\]\.claim\.delta"),
    (lambda r: r["claim"].update(neighbourhood="nearby"), r"releases\[0\]\.claim\.neighbourhood"),
    (lambda r: r["audit"].update(gate_hash="nothex"), r"releases\[0\]\.audit\.gate_hash"),
    (lambda r: r.pop("dataset"), r"releases\[0\]\.dataset: Field required"),
    (lambda r: r.update(extra=1), r"releases\[0\]\.extra: Extra inputs"),
])
def test_a_malformed_entry_is_refused_naming_file_and_key(ledger_file: Path, edit, message: str) -> None:
    append_release(ledger_file, release())
    raw = yaml.safe_load(ledger_file.read_text(encoding="utf-8"))
    edit(raw["releases"][0])
    ledger_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(LedgerError, match=message) as info:
        read_ledger(ledger_file)
    assert str(ledger_file) in str(info.value)


def test_not_yaml_or_not_a_mapping_is_refused(ledger_file: Path) -> None:
    ledger_file.write_text("version: [1\n", encoding="utf-8")
    with pytest.raises(LedgerError, match="is not valid YAML"):
        read_ledger(ledger_file)
    ledger_file.write_text("- 1\n", encoding="utf-8")
    with pytest.raises(LedgerError, match="must be a mapping"):
        read_ledger(ledger_file)
    ledger_file.write_text("version: 2\nreleases: []\n", encoding="utf-8")
    with pytest.raises(LedgerError, match="version"):
        read_ledger(ledger_file)


def test_duplicate_names_in_the_file_are_refused(ledger_file: Path) -> None:
    append_release(ledger_file, release())
    raw = yaml.safe_load(ledger_file.read_text(encoding="utf-8"))
    raw["releases"].append(raw["releases"][0])
    ledger_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(LedgerError, match="used twice"):
        read_ledger(ledger_file)
