"""The README's code blocks and its quick commands, run as written (issue 28: a README that drifts fails CI).

Slow commands (whole pipelines, flows) are in ``test_one_shot_flows.py`` and ``test_review_commands.py``;
``test_readme_coverage.py`` maps every README command to its test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from privaudit.config import parse_params
from tests.readme.commands import README, block_text, doc_snippets, doc_text

ROOT = README.parent


def _blocks(kind: str, first_line: str) -> list[str]:
    """Every block of the README and the guide of ``kind`` whose first line starts with ``first_line``."""
    found = [block_text(s.line, s.path) for s in doc_snippets() if s.kind == kind and s.text.startswith(first_line)]
    assert found, (kind, first_line)
    return found


def test_readme_opacus_trainer_block_trains() -> None:
    """The ```python block (the white-box user trainer): it runs and trains a linear head, seeded."""
    import torch

    [block] = set(_blocks("block:python", "import numpy as np, torch"))
    namespace: dict = {}
    exec(compile(block, "docs/howto/own-trainer.md", "exec"), namespace)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    kwargs = dict(epochs=2, batch_size=16)
    head = namespace["train"](X, y, 2, 11, **kwargs)
    assert isinstance(head, torch.nn.Linear) and head.weight.shape == (2, 6)
    again = namespace["train"](X, y, 2, 11, **kwargs)
    assert torch.equal(head.weight, again.weight)  # all randomness from `seed`


def test_every_yaml_block_and_example_is_read_by_dvcs_own_reader() -> None:
    """Issue 34: DVC reads params.yaml with its own YAML loader (ruamel), stricter than PyYAML: a flow mapping
    with an unquoted ``target: examples/x.py:train`` is "corrupted" for DVC. Every ```yaml block of the README
    and every YAML file of examples/ parses there, to what PyYAML reads."""
    from dvc.utils.serialize import parse_yaml

    texts = {f"{s.where}:{s.line}": block_text(s.line, s.path) for s in doc_snippets() if s.kind == "block:yaml"}
    texts |= {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.y*ml"))}
    assert len(texts) >= 3, sorted(texts)
    for where, text in texts.items():
        assert parse_yaml(text, "params.yaml") == yaml.safe_load(text), where


def test_readme_defenders_yaml_block_is_valid_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```yaml block, put into params.yaml as the README says, passes ``config`` (its target imports)."""
    monkeypatch.chdir(ROOT)
    for text in _blocks("block:yaml", "defenders:") + _blocks("block:yaml", "# params.yaml: your opacus loop"):
        block = yaml.safe_load(text)
        raw = {**yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")), **block}
        [spec] = parse_params(raw).defenders
        assert spec.kind == "python" and spec.observable is True and spec.claimed_epsilon == 1.0


def test_readme_declared_mechanism_block_is_read_by_dvc_and_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```yaml block of "Declaring a mechanism", read by DVC's own YAML reader (as `dvc repro` reads
    params.yaml) and then validated by ``config``: a pure claim (δ = 0) with a Laplace mechanism."""
    from dvc.utils.serialize import parse_yaml

    monkeypatch.chdir(ROOT)
    for text in _blocks("block:yaml", "# params.yaml: a pure-DP trainer"):
        block = parse_yaml(text, "params.yaml")
        raw = {**yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")), **block}
        [spec] = parse_params(raw).defenders
        assert spec.claimed_delta == 0 and spec.mechanism is not None and spec.mechanism.kind == "laplace"
        assert spec.mechanism.epsilon_at(0.0) == pytest.approx(spec.claimed_epsilon)


def _make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M))


def test_every_make_target_the_readme_names_exists() -> None:
    """``make <target>`` in the README: each target is in the Makefile (the targets themselves: see the coverage map)."""
    named = {s.text.split()[1] for s in doc_snippets() if s.kind == "command" and s.text.startswith("make ")}
    assert {"audit", "test", "setup", "verdict", "test-all", "test-server"} <= named
    assert named <= _make_targets(), sorted(named - _make_targets())


@pytest.mark.parametrize("script", ["ltu_table1.py", "bench_ltu_retrain.py", "bench_sample_risk.py"])
def test_readme_benchmark_commands_parse(script: str) -> None:
    """Benchmarks print measurements (minutes to hours) and are not run here; the flags the README gives them are real."""
    flags = {flag for s in doc_snippets() if f"benchmarks/{script}" in s.text for flag in re.findall(r"--[\w-]+", s.text)}
    text = doc_text()
    flags |= {f for f in re.findall(r"`(--[\w-]+)", text) if script == "ltu_table1.py" and f in {"--dataset", "--location-path"}}
    proc = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    missing = sorted(f for f in flags if f not in proc.stdout)
    assert not missing, f"README gives benchmarks/{script} flags it does not have: {missing}"


def test_lidp_self_check_command(tmp_path: Path) -> None:
    """``python -m stages.lidp --self-check 2``: the auditor on a Gaussian mechanism with known ε = 2."""
    [command] = {s.text for s in doc_snippets() if re.fullmatch(r"python -m stages\.lidp --self-check \d+", s.text)}
    proc = subprocess.run([sys.executable, *command.split()[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "lidp self-check: Gaussian mechanism with eps=2" in proc.stdout


def test_readme_per_sample_counts_are_the_committed_metrics() -> None:
    """Issue 34: the README quoted per-sample counts (mlp 9, logreg 8) that the committed metrics no longer had."""
    import json

    text = doc_text()
    m = re.search(r"`mlp` (\d+) of (\d+) flagged, `logreg` (\d+), `dpsgd_eps1` none", text)
    assert m, "the guide's per-sample sentence changed: update this test with it"
    ltu = json.loads((ROOT / "metrics" / "ltu.json").read_text(encoding="utf-8"))
    risk = {name: ltu[name]["sample_risk"] for name in ("mlp", "logreg", "dpsgd_eps1")}
    assert (int(m[1]), int(m[2]), int(m[3])) == (risk["mlp"]["flagged"], risk["mlp"]["tested"],
                                                 risk["logreg"]["flagged"])
    assert risk["dpsgd_eps1"]["flagged"] == 0
