"""Blocks and commands of the README and the guide that are checked the way a user runs them (fast).

The slow ones (experiments, flows, going back) are in tests/readme; ``test_readme_coverage.py`` maps every
command and block of the README and of docs/ to its test."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.config import ParamsError, parse_params
from tests.readme.commands import block_text, doc_snippets

ROOT = Path(__file__).resolve().parents[2]


def _commands(pattern: str) -> list[str]:
    return sorted({s.text for s in doc_snippets() if s.kind == "command" and re.fullmatch(pattern, s.text)})


def test_dataset_block_is_valid_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ``dataset:`` block, read by DVC's YAML reader and put into params.yaml, passes ``config``."""
    from dvc.utils.serialize import parse_yaml

    monkeypatch.chdir(ROOT)
    blocks = [block_text(s.line, s.path) for s in doc_snippets() if s.kind == "block:yaml" and s.text == "dataset:"]
    assert blocks
    for text in blocks:
        block = parse_yaml(text, "params.yaml")
        raw = {**yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")), **block}
        params = parse_params(raw)
        assert params.dataset.name == "csv" and params.dataset.path.startswith("data/external/")
        assert params.dataset.label_column


def _merged_into_params(first: str) -> list[dict]:
    """Every guide YAML block whose first line is ``first``, read by DVC's YAML reader and merged key by key into
    the repository's params.yaml (as a user pastes it into theirs)."""
    from dvc.utils.serialize import parse_yaml

    blocks = [block_text(s.line, s.path) for s in doc_snippets() if s.kind == "block:yaml" and s.text == first]
    assert blocks, f"no guide block starts with {first!r}"
    merged = []
    for text in blocks:
        raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
        for key, value in parse_yaml(text, "params.yaml").items():
            raw[key].update(value)
        merged.append(raw)
    return merged


def test_total_budget_block_is_valid_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's ``gate.total_budget`` block, read by DVC's YAML reader into params.yaml, passes ``config``."""
    monkeypatch.chdir(ROOT)
    for raw in _merged_into_params("# params.yaml: a total budget over the releases of one data set"):
        budget = parse_params(raw).gate.total_budget
        assert budget is not None and (budget.epsilon, budget.delta) == (4.0, 1e-5)


def test_gpu_block_is_valid_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """The at-scale guide's GPU block, read by DVC's YAML reader into params.yaml, passes ``config`` and sets what
    its comments say."""
    monkeypatch.chdir(ROOT)
    for raw in _merged_into_params("# params.yaml: an audit on one GPU, with a budget"):
        params = parse_params(raw)
        assert params.base.device == "cuda" and params.compute.n_jobs == "auto"
        assert params.compute.budget_minutes == 30


def test_defender_key_overrides_as_dvc_applies_them(tmp_path: Path) -> None:
    """``dvc exp run -S 'defenders.1.…'`` of the guide: DVC's own override code (``dvc.utils.hydra.apply_overrides``,
    what ``dvc exp run -S`` calls on params.yaml) takes the dotted form and the ``+`` form, and the result is
    valid params; the bracket form the guide warns about fails with Hydra's lexer error, as it says."""
    from dvc.utils.hydra import apply_overrides

    commands = _commands(r"dvc exp run -S '\+?defenders(\.1|\[1\])\.\w+=\S+'")
    assert len(commands) >= 3, commands
    for command in commands:
        [override] = shlex.split(command)[4:]
        params = tmp_path / "params.yaml"
        shutil.copy(ROOT / "params.yaml", params)
        if "[" in override:
            with pytest.raises(Exception, match="set-param") as err:
                apply_overrides(params, [override])
            assert "LexerNoViableAltException" in repr(err.value.__cause__) + str(err.value.__cause__), err.value
            continue
        apply_overrides(params, [override])
        raw = yaml.safe_load(params.read_text(encoding="utf-8"))
        key, value = override.lstrip("+").split("=")
        spec = parse_params(raw).defenders[int(key.split(".")[1])]
        assert getattr(spec, key.split(".")[2]) == pytest.approx(float(value)), override


def test_a_key_the_kind_lacks_is_refused_naming_it(tmp_path: Path) -> None:
    """The guide: ``epochs`` on the logistic regression (entry 0) stops the first stage naming defenders[0].epochs."""
    from dvc.utils.hydra import apply_overrides

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_overrides(params, ["+defenders.0.epochs=5"])
    with pytest.raises(ParamsError, match=r"defenders\[0\]\.epochs: unknown key"):
        parse_params(yaml.safe_load(params.read_text(encoding="utf-8")))


def test_the_n_defender_command_counts_the_defender_rows(tmp_path: Path) -> None:
    """The guide's one-liner after ``dvc repro split`` prints the Defender-set size, run on the table the split
    stage's own function writes for digits (898 Defender rows at the default ``split.defender_fraction``)."""
    from sklearn.datasets import load_digits

    from privaudit.config import load_params
    from privaudit.data.split import MEMBERSHIP_FILE, stratified_split

    [command] = _commands(r"python -c .*membership\.parquet.*")
    y = load_digits().target
    split = load_params(ROOT / "params.yaml").split
    table = stratified_split(np.array([f"digits-{i:05d}" for i in range(len(y))]), y, split.defender_fraction,
                             rng=np.random.default_rng(0))
    (tmp_path / "data" / "split").mkdir(parents=True)
    table.to_parquet(tmp_path / "data" / "split" / MEMBERSHIP_FILE)
    proc = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "898"  # the n the guide quotes for digits


def test_the_declared_opacus_entry_states_the_numbers_the_guide_derives(monkeypatch: pytest.MonkeyPatch) -> None:
    """"Declare a mechanism": the σ command prints the σ the entry declares, for the q and T the guide derives
    for n = 898 (q = B / n, T = E × round(n / B)); the entry passes ``config`` (its mechanism's own ε is below the
    claim) and hands the trainer the same q and T through ``options``, which the example trainer runs."""
    import inspect

    from dvc.utils.serialize import parse_yaml

    from privaudit.defenders.user_target import resolve_target

    monkeypatch.chdir(ROOT)
    train = resolve_target("examples/opacus_user_trainer.py:train")
    [command] = _commands(r"python -c \"from opacus\..*get_noise_multiplier.*")
    [block] = [block_text(s.line, s.path) for s in doc_snippets() if s.kind == "block:yaml"
               and s.text.startswith("# params.yaml: your opacus loop with its declared mechanism")]
    n, batch, epochs = 898, 64, 20
    q, steps = batch / n, epochs * round(n / batch)
    assert f"sample_rate={batch}/{n}, steps={steps}" in command
    proc = subprocess.run([sys.executable, *shlex.split(command)[1:]], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sigma = float(proc.stdout.strip().splitlines()[-1])
    [entry] = parse_yaml(block, "params.yaml")["defenders"]
    assert entry["options"] == {"sample_rate": q, "steps": steps}
    assert entry["mechanism"] == {"kind": "subsampled_gaussian", "noise_multiplier": sigma, "sample_rate": q,
                                  "steps": steps}
    raw = {**yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")), "defenders": [entry]}
    [spec] = parse_params(raw).defenders
    assert spec.mechanism is not None and spec.mechanism.epsilon_at(entry["claimed_delta"]) < entry["claimed_epsilon"]
    assert {"sample_rate", "steps"} <= set(inspect.signature(train).parameters)
