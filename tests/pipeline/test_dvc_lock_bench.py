"""``benchmarks/bench_dvc_lock.py`` times DVC's own rewrite of the repository's ``dvc.lock``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_dvc_lock_benchmark_times_a_rewrite_per_stage(tmp_path: Path) -> None:
    out = tmp_path / "lock.txt"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_dvc_lock.py"), "--repeats", "1",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    stages = len(yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"])
    assert f"{stages} stages) as DVC does after each stage" in text, text
    m = re.search(r"parse ([\d.]+) s \+ dump ([\d.]+) s = ([\d.]+) s a stage; x (\d+) stages = ([\d.]+) s", text)
    assert m, text
    parse, dump, per_stage, n, total = (float(g) for g in m.groups())
    assert parse > 0 and dump > 0 and abs(per_stage - (parse + dump)) <= 0.002 and int(n) == stages
    assert abs(total - per_stage * stages) <= 0.1
