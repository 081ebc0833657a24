"""``benchmarks/bench_probe_lengths.py`` runs end to end on a tiny shape and reports both probe designs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_probe_lengths_benchmark_reports_both_designs(tmp_path: Path) -> None:
    out = tmp_path / "probe.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_probe_lengths.py"), "--n", "300", "--d", "8",
                          "--rounds", "3", "--whole", "1", "--draws", "20", "--out", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert text.strip() == res.stdout.strip()
    rows = re.findall(r"K = (\d+) epochs \((before|now);.*5/50/95 %: 2 models ([\d./]+); 64 models ([\d./]+)", text)
    assert [(k, label) for k, label, *_ in rows] == [("2", "before"), ("4", "now")], text
    for *_, small, large in rows:  # three percentiles each, in order
        for triple in (small, large):
            q = [float(x) for x in triple.split("/")]
            assert len(q) == 3 and 0 < q[0] <= q[1] <= q[2], text
